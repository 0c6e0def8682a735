package conn

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

var opSizes = []int{0, 1, 4095, 4096, 4097, 64<<10 + 1, 16 << 20}

// splitSGL cuts [0, n) of mr into up to k SGEs of unequal lengths.
func splitSGL(mr *MR, off, n, k int) []SGE {
	if n == 0 {
		return nil
	}
	var sgl []SGE
	for i := 0; i < k && n > 0; i++ {
		l := n
		if i < k-1 {
			l = n/(k-i) + i // uneven cuts
			l = min(l, n)
		}
		sgl = append(sgl, mr.SGE(off, l))
		off += l
		n -= l
	}
	return sgl
}

// TestOps_EndToEnd moves data with every base operation at every size,
// over loopback TCP and net.Pipe, with multi-SGE lists on both sides, and
// verifies every byte.
func TestOps_EndToEnd(t *testing.T) {
	for _, network := range []string{"tcp", "pipe"} {
		t.Run(network, func(t *testing.T) {
			checkLeaks(t)
			caps := QPCaps{MaxSendSGE: 4, MaxRecvSGE: 4}
			client, server := connectPair(t, pairConfig{network: network, caps: caps})
			maxSize := opSizes[len(opSizes)-1]
			// server side: a receive buffer, a remote-writable target, a
			// remote-readable source.
			rbuf := server.register(t, maxSize+64, LocalWrite)
			target := server.register(t, maxSize+64, LocalWrite|RemoteWrite)
			source := server.register(t, maxSize+64, RemoteRead)
			copy(source.Bytes(), pattern(maxSize+64, 9))
			sync := server.register(t, 16, LocalWrite)
			// client side
			src := client.register(t, maxSize+64, 0)
			sink := client.register(t, maxSize+64, LocalWrite)

			for _, size := range opSizes {
				t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
					data := pattern(size, byte(size))
					copy(src.Bytes()[3:], data)

					// Send/Receive, 3 SGEs out, 4 SGEs in.
					require.NoError(t, server.qp.PostRecv(RecvWR{ID: 100, SGL: splitSGL(rbuf, 5, size+8, 4)}))
					require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpSend, Flags: Signaled, SGL: splitSGL(src, 3, size, 3)}))
					require.Equal(t, uint32(size), client.waitOK(t, WCSend).ByteLen)
					wc := server.waitOK(t, WCRecv)
					require.Equal(t, uint64(100), wc.ID)
					require.Equal(t, uint32(size), wc.ByteLen)
					require.Equal(t, data, rbuf.Bytes()[5:5+size])

					// RDMA Write, 2 SGEs, then a Send so the target may look.
					require.NoError(t, server.qp.PostRecv(RecvWR{ID: 101, SGL: []SGE{sync.SGE(0, 16)}}))
					require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpWrite, Flags: Signaled, SGL: splitSGL(src, 3, size, 2), Remote: target.Remote(7)}))
					require.NoError(t, client.qp.PostSend(SendWR{ID: 3, Op: OpSend}))
					require.Equal(t, uint32(size), client.waitOK(t, WCRDMAWrite).ByteLen)
					require.Equal(t, uint64(101), server.waitOK(t, WCRecv).ID)
					require.Equal(t, data, target.Bytes()[7:7+size])

					// RDMA Read into 3 SGEs.
					clear(sink.Bytes())
					require.NoError(t, client.qp.PostSend(SendWR{ID: 4, Op: OpRead, Flags: Signaled, SGL: splitSGL(sink, 1, size, 3), Remote: source.Remote(11)}))
					wc = client.waitOK(t, WCRDMARead)
					require.Equal(t, uint64(4), wc.ID)
					require.Equal(t, uint32(size), wc.ByteLen)
					require.Equal(t, source.Bytes()[11:11+size], sink.Bytes()[1:1+size])
				})
			}
		})
	}
}

// Every operation's completion opcode, and a receive's, has a name of its
// own in wcOpNames: an opcode added without one would print as
// "WCOpcode(n)", and two sharing a name could not be told apart in logs.
func TestOps_CompletionOpcodesNamed(t *testing.T) {
	used := map[WCOpcode]bool{WCRecv: true}
	for o := range sendOps {
		require.NotEmpty(t, sendOps[o].name, "Op %d has no name", o)
		used[sendOps[o].wc] = true
	}
	seen := map[string]WCOpcode{}
	for o := range used {
		require.Less(t, int(o), len(wcOpNames), "%d", o)
		name := o.String()
		require.NotEmpty(t, wcOpNames[o], "WCOpcode %d has no name", o)
		prev, dup := seen[name]
		require.False(t, dup, "WCOpcode %d and %d are both %q", prev, o, name)
		seen[name] = o
	}
	require.Len(t, used, len(wcOpNames), "a named completion opcode no operation completes with")
	require.Equal(t, "WCOpcode(200)", WCOpcode(200).String())
}
