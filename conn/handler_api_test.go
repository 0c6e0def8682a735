package conn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every API call made from inside a completion handler returns: handlers
// run with no lock of the library held, and nothing a call waits for
// depends on the goroutine that runs the handler.
func TestCompletionHandler_EveryAPICallFromAHandler(t *testing.T) {
	calls := []struct {
		name string
		call func(qp, peer *QP, mr *MR)
	}{
		{"PostSend", func(qp, _ *QP, mr *MR) {
			qp.PostSend(SendWR{ID: 900, Op: OpWrite, SGL: []SGE{mr.SGE(0, 8)}, Remote: mr.Remote(0)})
		}},
		{"PostRecv", func(qp, _ *QP, mr *MR) { qp.PostRecv(RecvWR{ID: 901, SGL: []SGE{mr.SGE(8, 8)}}) }},
		{"PostSendBatch", func(qp, _ *QP, mr *MR) {
			qp.PostSendBatch([]SendWR{{Op: OpWrite, SGL: []SGE{mr.SGE(0, 8)}, Remote: mr.Remote(0)}})
		}},
		{"Close", func(qp, _ *QP, _ *MR) { qp.Close() }},
		{"Abort", func(qp, _ *QP, _ *MR) { qp.Abort() }},
		{"Close the peer", func(_, peer *QP, _ *MR) { peer.Close() }},
		{"Invalidate", func(_, _ *QP, mr *MR) { mr.Invalidate() }},
		{"Deregister", func(_, _ *QP, mr *MR) { mr.Deregister() }},
		{"queries", func(qp, _ *QP, _ *MR) {
			_ = qp.Err()
			_ = qp.Negotiated()
			_, _ = qp.ReadLimits()
			_ = qp.PeerIsIwarpGo()
			_ = qp.LocalAddr()
			_ = qp.RemoteAddr()
		}},
	}
	for _, c := range calls {
		for _, where := range []string{"receive handler", "send handler"} {
			t.Run(c.name+" from a "+where, func(t *testing.T) {
				checkLeaks(t)
				returned := make(chan struct{})
				var qp, peer *QP
				var spare *MR
				fired := false
				h := func(wc *WorkCompletion) {
					want := WCRecv
					if where == "send handler" {
						want = WCSend
					}
					if fired || wc.Status != WCSuccess || wc.Op != want {
						return
					}
					fired = true
					c.call(qp, peer, spare)
					close(returned)
				}
				client, server := handlerPair(t, h)
				qp, peer = client.qp, server.qp
				spare = client.register(t, 64, LocalWrite|RemoteWrite)
				buf := client.register(t, 64, LocalWrite)
				require.NoError(t, qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{buf.SGE(8, 8)}}))
				require.NoError(t, qp.PostSend(SendWR{ID: 2, Op: OpSend, Flags: Signaled, SGL: []SGE{buf.SGE(0, 8)}}))
				returnsWithin(t, hangLimit, c.name+" from a "+where, func() { <-returned })
				returnsWithin(t, hangLimit, "Close afterwards", func() {
					qp.Close()
					peer.Close()
				})
			})
		}
	}
}
