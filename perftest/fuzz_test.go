package perftest

import (
	"encoding/binary"
	"testing"
)

// fuzzMessages encodes a peer's messages for FuzzProtocol: a 2-byte
// length before each.
func fuzzMessages(selector byte, msgs [][]byte) []byte {
	b := []byte{selector}
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

// FuzzProtocol feeds a Protocol whatever a peer might send on the comm
// connection, for every test and role: it must reject or take each
// message without panicking, keep what it takes within bounds, and stay
// at a failed step.
func FuzzProtocol(f *testing.F) {
	for _, c := range captureTests {
		comm, _ := readCapture(f, c.name)
		up, down := sends(comm.up), sends(comm.down)
		for r, peer := range [][][]byte{down, up} { // client hears down, server hears up
			f.Add(fuzzMessages(byte(c.test-1)*2+byte(r), peer))
		}
	}
	v629 := [][]byte{AppendVersion(nil, "6.29"), {0, 0, 16, 0}, {0, 0, 0, 64}, []byte("3\x00"), make([]byte, destLen629)}
	f.Add(fuzzMessages(0, v629))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		test := Tests()[int(data[0]>>1)%len(Tests())]
		role := Client
		if data[0]&1 == 1 {
			role = Server
		}
		data = data[1:]
		p, err := NewProtocol(captureParams(test, role))
		if err != nil {
			t.Fatal(err)
		}
		for steps := 0; steps < 1000; steps++ {
			st := p.Next()
			switch st.Kind {
			case StepEnd:
				return
			case StepExchange:
				if len(st.Msg) > MaxMessage {
					t.Fatalf("a %d-byte %s message", len(st.Msg), st.What)
				}
				if len(data) < 2 {
					return
				}
				n := int(binary.BigEndian.Uint16(data))
				data = data[2:]
				if n > len(data) {
					n = len(data)
				}
				msg := data[:n]
				data = data[n:]
				if err := p.Reply(msg); err != nil {
					if again := p.Next(); again.Kind != StepExchange || again.What != st.What {
						t.Fatalf("a failed %s moved the protocol to %v %s", st.What, again.Kind, again.What)
					}
					return
				}
				if cb := p.CycleBuffer(); cb < 1 || cb > maxCycleBuffer {
					t.Fatalf("cycle buffer %d", cb)
				}
				if cl := p.CacheLineSize(); cl < 1 || cl > maxCacheLineSize {
					t.Fatalf("cache line %d", cl)
				}
				if m := p.MTU(); m < 256 || m > 4096 {
					t.Fatalf("MTU %d", m)
				}
			default:
				if err := p.Done(); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Fatal("the conversation does not end")
	})
}

// FuzzParse: the message decoders on arbitrary bytes.
func FuzzParse(f *testing.F) {
	f.Add([]byte("6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add(make([]byte, destLen606))
	f.Add(make([]byte, destLen629))
	f.Add([]byte("3\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := ParseVersion(b); err == nil {
			if len(v) >= versionLen || v.number() < 0 {
				t.Fatalf("version %q", v)
			}
			if got, _ := ParseVersion(AppendVersion(nil, v)); got != v {
				t.Fatalf("version %q does not round-trip: %q", v, got)
			}
		}
		for _, v := range []Version{"6.06", "6.29"} {
			d, err := ParseDest(b, v)
			if err != nil {
				continue
			}
			again, err := ParseDest(AppendDest(nil, &d, v), v)
			if err != nil || again != d {
				t.Fatalf("dest %+v does not round-trip", d)
			}
		}
		parseMTU(b)
		parseSysData("cycle buffer", b, maxCycleBuffer)
		var r BWReport
		for i := range reportItems {
			r.setItem(i, b)
		}
	})
}
