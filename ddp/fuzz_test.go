package ddp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"
)

func FuzzTaggedHeader(f *testing.F) {
	f.Add(AppendTagged(nil, MakeControl(true, true), 0x40, 1, 0))
	f.Add(AppendTagged(nil, MakeControl(true, false), 0x42, 0x3e739b00, 0x564f606d5550))
	f.Add(AppendTagged(nil, Control(0xff), 0xff, 0xffffffff, 0xffffffffffffffff))
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = CheckHeader(b, len(b))
		h, ok := ParseTagged(b)
		if !ok {
			return
		}
		again := AppendTagged(nil, h.Control(), h.RsvdULP(), h.STag(), h.TO())
		if !bytes.Equal(again, b[:TaggedHeaderLen]) {
			t.Fatalf("round trip: %x -> %x", b[:TaggedHeaderLen], again)
		}
		var r TaggedReceiver
		_, _ = r.Receive(h, len(b))
	})
}

func FuzzUntaggedHeader(f *testing.F) {
	f.Add(AppendUntagged(nil, MakeControl(false, true), 0x43, 0, 0, 1, 0))
	f.Add(AppendUntagged(nil, MakeControl(false, true), 0x47, 0, 2, 1, 0))
	f.Add(AppendUntagged(nil, MakeControl(false, false), 0x44, 0x1234, 0, 9, 1424))
	f.Add([]byte{0x41, 0x43, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = CheckHeader(b, len(b))
		h, ok := ParseUntagged(b)
		if !ok {
			return
		}
		again := AppendUntagged(nil, h.Control(), h.RsvdULP(), h.RsvdULPWord(), h.QN(), h.MSN(), h.MO())
		if !bytes.Equal(again, b[:UntaggedHeaderLen]) {
			t.Fatalf("round trip: %x -> %x", b[:UntaggedHeaderLen], again)
		}
		qs := NewUntaggedQueues(3)
		_, _ = qs.Receive(h, len(b), 64)
	})
}

func FuzzSegmenter(f *testing.F) {
	f.Add(uint16(4000), uint16(1442), uint8(3), true, uint64(0x1000))
	f.Add(uint16(0), uint16(100), uint8(0), false, uint64(0))
	f.Add(uint16(65535), uint16(65535), uint8(255), false, uint64(0))
	f.Add(uint16(100), uint16(19), uint8(7), true, ^uint64(0)-99)
	f.Fuzz(func(t *testing.T, msgLen, mulpdu uint16, cuts uint8, tagged bool, to uint64) {
		msg := message(int(msgLen))
		// Split the message into pieces at a few points, with empty pieces.
		var pieces [][]byte
		rest := msg
		for i := 0; i < int(cuts%8); i++ {
			k := (int(cuts) * (i + 3)) % (len(rest) + 1)
			pieces = append(pieces, rest[:k], nil)
			rest = rest[k:]
		}
		pieces = append(pieces, rest)

		var s Segmenter
		hdrLen := UntaggedHeaderLen
		var err error
		if tagged {
			hdrLen = TaggedHeaderLen
			err = s.StartTagged(pieces, int(mulpdu), 0x40, 0x77, to)
		} else {
			err = s.StartUntagged(pieces, int(mulpdu), 0x43, 0, 0, 5)
		}
		switch {
		case int(mulpdu) <= hdrLen:
			if !errors.Is(err, ErrMULPDU) {
				t.Fatalf("mulpdu %d: err %v", mulpdu, err)
			}
			return
		case tagged && msgLen > 0 && to > ^uint64(0)-uint64(msgLen): // TO + length = 2^64 wraps too (RFC 5041 §7.1)
			if !errors.Is(err, ErrMessageTOWraps) {
				t.Fatalf("wrap: err %v", err)
			}
			return
		case err != nil:
			t.Fatal(err)
		}
		max := int(mulpdu) - hdrLen
		var got []byte
		segs := 0
		for {
			seg, ok := s.Next(nil, nil)
			if !ok {
				break
			}
			segs++
			c := Control(seg.Header[0])
			if c.Last() != seg.Last || c.Tagged() != tagged || len(seg.Header) != hdrLen {
				t.Fatalf("bad header %x", seg.Header)
			}
			if seg.Len > max || (!seg.Last && seg.Len != max) {
				t.Fatalf("segment %d has %d bytes, max %d", segs, seg.Len, max)
			}
			if tagged {
				if Tagged(seg.Header).TO() != to+uint64(len(got)) {
					t.Fatal("TO")
				}
			} else if u := Untagged(seg.Header); u.MO() != uint32(len(got)) || u.MSN() != 5 {
				t.Fatal("MO/MSN")
			}
			for _, p := range seg.Payload {
				got = append(got, p...)
			}
			if seg.Last != (len(got) == len(msg)) {
				t.Fatal("L not exactly on the last segment")
			}
		}
		want := 1
		if len(msg) > 0 {
			want = (len(msg) + max - 1) / max
		}
		if segs != want || !bytes.Equal(got, msg) {
			t.Fatalf("%d segments (want %d), payload equal %v", segs, want, bytes.Equal(got, msg))
		}
	})
}

// untaggedModel is a second, deliberately plain statement of the untagged
// receive rules, used as the fuzz oracle.
type untaggedModel struct {
	next        uint32
	active      bool
	recv, limit uint64
}

func (m *untaggedModel) receive(last bool, msn, mo uint32, n, buf int) termcode.Code {
	switch {
	case msn != m.next:
		return termcode.DDPUntaggedMSNRange
	case m.active && uint64(mo) != m.recv, !m.active && mo != 0:
		return termcode.DDPUntaggedInvalidMO
	case !m.active && buf < 0:
		return termcode.DDPUntaggedNoBuffer
	}
	limit := m.limit
	if !m.active {
		limit = uint64(buf)
	}
	if uint64(mo)+uint64(n) > limit {
		return termcode.DDPUntaggedTooLong
	}
	if last {
		*m = untaggedModel{next: m.next + 1}
	} else {
		m.active, m.recv, m.limit = true, uint64(mo)+uint64(n), limit
	}
	return 0
}

func FuzzUntaggedQueue(f *testing.F) {
	seed := func(ops ...[10]byte) []byte {
		var b []byte
		for _, op := range ops {
			b = append(b, op[:]...)
		}
		return b
	}
	// op: flags, msn delta, mo (2), len (2), buf (2), 2 spare
	f.Add(seed([10]byte{1, 0, 0, 0, 0, 16, 0, 16}))
	f.Add(seed([10]byte{0, 0, 0, 0, 0, 8, 0, 64}, [10]byte{1, 0, 0, 8, 0, 8}))
	f.Add(seed([10]byte{1, 1, 0, 0, 0, 0, 0xff, 0xff}))
	f.Fuzz(func(t *testing.T, data []byte) {
		q := NewUntaggedQueue()
		m := untaggedModel{next: 1}
		for len(data) >= 10 {
			op := data[:10]
			data = data[10:]
			last := op[0]&1 != 0
			msn := m.next + uint32(op[1]%3) - 1
			if op[0]&2 == 0 {
				msn = m.next
			}
			mo := uint32(binary.BigEndian.Uint16(op[2:]))
			if op[0]&4 == 0 {
				mo = uint32(m.recv)
			}
			n := int(binary.BigEndian.Uint16(op[4:]))
			buf := int(binary.BigEndian.Uint16(op[6:]))
			if op[0]&8 != 0 {
				buf = NoBuffer
			}
			h := Untagged(AppendUntagged(nil, MakeControl(false, last), 0x43, 0, 0, msn, mo))
			s, err := q.Receive(h, UntaggedHeaderLen+n, buf)
			want := m.receive(last, msn, mo, n, buf)
			var got termcode.Code
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("untyped error %v", err)
				}
				got = e.Code
			}
			if got != want {
				t.Fatalf("queue says %v, model says %v", got, want)
			}
			if err == nil && (s.MO != mo || s.Len != n || (s.Last && s.MsgLen != int(mo)+n)) {
				t.Fatalf("segment %+v", s)
			}
			if q.NextMSN() != m.next || q.InProgress() != m.active {
				t.Fatal("state diverged from the model")
			}
		}
	})
}
