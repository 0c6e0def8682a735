package perftest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replay drives a Protocol of one role through a captured comm
// conversation: every message it produces must be the captured message of
// that side (with the captured dests and report filled in, and the
// uninitialised padding of struct pingpong_dest left out), and it must
// take every captured message of the other side.
func replay(t *testing.T, test Test, role Role, mine, theirs [][]byte) *Protocol {
	t.Helper()
	p, err := NewProtocol(captureParams(test, role))
	require.NoError(t, err)
	var kinds []StepKind
	sent := 0
	for {
		st := p.Next()
		kinds = append(kinds, st.Kind)
		if st.Kind == StepEnd {
			break
		}
		if st.Kind != StepExchange {
			if st.Kind == StepConnect {
				// From here on the handshakes carry this side's dest,
				// which the capture tells: the first non-zero one.
				for _, m := range mine {
					if len(m) == destLen606 && !allZero(m) {
						d, err := ParseDest(m, OwnVersion)
						require.NoError(t, err)
						p.SetDest(0, d)
						break
					}
				}
			}
			if st.Kind == StepRun && role == Client && test < WriteLat {
				// The client's report is the last five 8-byte messages
				// before the closing handshake.
				var r BWReport
				items := mine[len(mine)-6 : len(mine)-1]
				if test == SendBW {
					items = nil
				}
				for i, it := range items {
					require.NoError(t, r.setItem(i, it))
				}
				p.SetReport(r)
			}
			require.NoError(t, p.Done(), "step %d", len(kinds))
			continue
		}
		require.Less(t, sent, len(mine), "%v %v sends more than the capture holds", test, role)
		want, got := mine[sent], st.Msg
		require.Len(t, got, len(want), "%v %v message %d (%s)", test, role, sent+1, st.What)
		switch {
		case st.What == "handshake":
			// Bytes 20–23 are padding after rkey: stack garbage in
			// perftest, zero here.
			assert.Equal(t, want[:20], got[:20], "message %d", sent+1)
			assert.Equal(t, want[24:], got[24:], "message %d", sent+1)
		case role == Server && len(want) == reportItemLen:
			// A server's report is uninitialised memory in perftest.
		default:
			assert.Equal(t, want, got, "%v %v message %d (%s)", test, role, sent+1, st.What)
		}
		require.NoError(t, p.Reply(theirs[sent]), "%v %v message %d (%s)", test, role, sent+1, st.What)
		sent++
	}
	assert.Equal(t, len(mine), sent, "%v %v: every captured message is accounted for", test, role)
	assert.Equal(t, len(theirs), sent)
	return p
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestProtocolReplaysSiwCaptures: the conversation of each test, in both
// roles, is the one two perftest 6.06 programs held over siw.
func TestProtocolReplaysSiwCaptures(t *testing.T) {
	for _, c := range captureTests {
		comm, _ := readCapture(t, c.name)
		up, down := sends(comm.up), sends(comm.down)
		for _, role := range []Role{Client, Server} {
			t.Run(fmt.Sprintf("%v/%v", c.test, role), func(t *testing.T) {
				mine, theirs := up, down
				if role == Server {
					mine, theirs = down, up
				}
				p := replay(t, c.test, role, mine, theirs)
				assert.Equal(t, Version("6.06"), p.PeerVersion())
				assert.Equal(t, 4096, p.CycleBuffer())
				assert.Equal(t, 64, p.CacheLineSize())
				assert.Equal(t, 1024, p.MTU())
				peer, err := ParseDest(theirs[6], OwnVersion)
				require.NoError(t, err)
				assert.Equal(t, peer, p.PeerDest(0), "the peer's dest from its first real handshake")
				if c.test == WriteBW || c.test == ReadBW {
					if role == Server {
						r := p.PeerReport()
						assert.Equal(t, BWReport{Size: 64, Iters: 200, BWPeak: r.BWPeak, BWAvg: r.BWAvg, MsgRate: r.MsgRate}, r)
						assert.Greater(t, r.BWAvg, 0.0)
						assert.InDelta(t, r.BWAvg, r.MsgRate*1e6*64/(1<<20), r.BWAvg*1e-9, "MB/s = Mpps × size / 2^20")
					}
				}
			})
		}
	}
}

// TestProtocolSteps: the order of local steps, which the captures show
// only indirectly (the test connection opens after the fifth message).
func TestProtocolSteps(t *testing.T) {
	kinds := func(test Test, role Role, all bool) []string {
		pa := captureParams(test, role)
		pa.AllSizes = all
		p, err := NewProtocol(pa)
		require.NoError(t, err)
		var out []string
		ex := 0
		for {
			st := p.Next()
			switch st.Kind {
			case StepEnd:
				if ex > 0 {
					out = append(out, fmt.Sprint(ex))
				}
				return append(out, "end")
			case StepExchange:
				ex++
				msg := make([]byte, len(st.Msg))
				copy(msg, st.Msg)
				var reply []byte
				switch {
				case st.What == "version":
					reply = AppendVersion(nil, "6.06")
				case len(msg) == destLen606:
					reply = make([]byte, destLen606)
				default:
					reply = msg
				}
				require.NoError(t, p.Reply(reply))
				continue
			}
			if ex > 0 {
				out = append(out, fmt.Sprint(ex))
				ex = 0
			}
			s := st.Kind.String()
			if st.Kind == StepRun || st.Kind == StepPostRecv {
				s += fmt.Sprint(" ", st.Size)
			}
			out = append(out, s)
			require.NoError(t, p.Done())
		}
	}
	assert.Equal(t, []string{"5", "connect", "4", "run 64", "7", "end"}, kinds(WriteBW, Client, false))
	assert.Equal(t, []string{"5", "connect", "11", "end"}, kinds(WriteBW, Server, false))
	assert.Equal(t, []string{"5", "connect", "4", "post receives 64", "1", "run 64", "1", "end"}, kinds(SendBW, Server, false))
	assert.Equal(t, []string{"5", "connect", "5", "run 64", "1", "end"}, kinds(SendBW, Client, false))
	assert.Equal(t, []string{"5", "connect", "5", "run 64", "end"}, kinds(WriteLat, Server, false))
	assert.Equal(t, []string{"5", "connect", "6", "end"}, kinds(ReadLat, Server, false))
	assert.Equal(t, []string{"5", "connect", "5", "run 64", "1", "end"}, kinds(ReadLat, Client, false))
	assert.Equal(t, []string{"5", "connect", "4", "post receives 64", "1", "run 64", "1", "end"}, kinds(SendLat, Client, false))
	all := kinds(SendBW, Server, true)
	assert.Equal(t, []string{"5", "connect", "4", "post receives 2", "1", "run 2", "1", "post receives 4"}, all[:8])
	assert.Equal(t, []string{"run 8388608", "2", "end"}, all[len(all)-3:], "a handshake after each size, then the closing one")
	w := kinds(WriteBW, Client, true)
	assert.Len(t, w, 2+1+23+2)
}

func TestProtocolRejects(t *testing.T) {
	p, err := NewProtocol(captureParams(WriteBW, Client))
	require.NoError(t, err)
	require.ErrorIs(t, p.Reply(AppendVersion(nil, "5.60")), ErrVersion, "perftest refuses versions before 5.70")
	require.ErrorIs(t, p.Reply([]byte("6.06")), ErrMessage)
	require.ErrorIs(t, p.Done(), ErrProtocol)
	require.NoError(t, p.Reply(AppendVersion(nil, "6.29")))
	require.ErrorIs(t, p.Reply([]byte{0, 0, 0, 0}), ErrMessage, "a zero cycle buffer")
	require.ErrorIs(t, p.Reply([]byte{0x7f, 0, 0, 0}), ErrMessage, "a cycle buffer beyond bounds")
	require.NoError(t, p.Reply([]byte{0, 0, 0x20, 0}))
	assert.Equal(t, 8192, p.CycleBuffer())
	require.NoError(t, p.Reply([]byte{0, 0, 0, 128}))
	require.NoError(t, p.Reply([]byte("9\x00")), "an invalid MTU is ignored")
	assert.Equal(t, 1024, p.MTU())
	st := p.Next()
	require.Len(t, st.Msg, destLen629, "a 6.29 peer's struct pingpong_dest")
	require.ErrorIs(t, p.Reply(make([]byte, destLen606)), ErrMessage)
	require.NoError(t, p.Reply(make([]byte, destLen629)))
	require.Equal(t, StepConnect, p.Next().Kind)
	require.ErrorIs(t, p.Reply(nil), ErrProtocol)

	for _, bad := range []Params{
		{Test: 0, Role: Client, Size: 1, CycleBuffer: 4096, CacheLineSize: 64, MTU: 3},
		{Test: WriteLat, Role: Client, QPs: 2, Size: 1, CycleBuffer: 4096, CacheLineSize: 64, MTU: 3},
		{Test: WriteBW, Role: 0, Size: 1, CycleBuffer: 4096, CacheLineSize: 64, MTU: 3},
		{Test: WriteBW, Role: Client, Size: 0, CycleBuffer: 4096, CacheLineSize: 64, MTU: 3},
		{Test: WriteBW, Role: Client, Size: 1, CycleBuffer: 0, CacheLineSize: 64, MTU: 3},
		{Test: WriteBW, Role: Client, Size: 1, CycleBuffer: 4096, CacheLineSize: 64, MTU: 6},
	} {
		_, err := NewProtocol(bad)
		assert.ErrorIs(t, err, ErrConfig, "%+v", bad)
	}
}
