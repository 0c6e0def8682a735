package conn

import "fmt"

// Op is the operation of a send-queue work request.
type Op uint8

const (
	// OpSend sends the SGL as an untagged message into the peer's next
	// posted receive. It completes once handed to TCP; a peer with no
	// receive posted ends the connection afterwards (package doc).
	OpSend Op = iota
	// OpSendInv is a Send that also invalidates InvSTag at the peer
	// (RFC 5040 Send with Invalidate).
	OpSendInv
	// OpSendSE is a Send with Solicited Event: the peer's receive completion
	// wakes CQ.WaitSolicited.
	OpSendSE
	// OpSendSEInv is a Send with Solicited Event and Invalidate.
	OpSendSEInv
	// OpWrite writes the SGL into the peer's memory at Remote. It completes
	// once handed to TCP; a peer that refuses the Write (no remote write
	// right, bad STag or bounds) ends the connection afterwards.
	OpWrite
	// OpRead reads Remote from the peer's memory into the SGL.
	OpRead
	// OpLocalInv invalidates the local STag InvSTag, in send-queue order.
	OpLocalInv
	// OpFlush asks an iwarp-go peer to make the range of FlushLength bytes
	// at Remote persistent and visible, and completes once it answered
	// that every RDMA Write sent before it on this queue pair is (the Flush
	// extension, docs/rfc-notes/flush-extension.md). Its completion has
	// WCFlushPersistent set only when the peer declared the bytes durable.
	// Toward a peer without the extension it completes with WCLocQPOpErr
	// (ErrFlushUnsupported); package pmemsink's Flush chooses for you.
	OpFlush
)

func (o Op) String() string {
	if int(o) < len(sendOps) {
		return sendOps[o].name
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// SendFlags modify a send-queue work request.
type SendFlags uint8

const (
	// Signaled asks for a completion when the work request succeeds.
	// Unsuccessful work requests always complete.
	Signaled SendFlags = 1 << iota
	// Fence makes the work request wait until every earlier RDMA Read of
	// the queue pair has completed.
	Fence
	// Solicited turns OpSend into OpSendSE and OpSendInv into OpSendSEInv.
	Solicited
	// FlushRegion makes OpFlush name the whole region of Remote's STag.
	FlushRegion
)

// SGE names length bytes of a registered region, starting Offset bytes
// into it. Work requests use SGEs to say where data comes from or goes to.
type SGE struct {
	MR     *MR
	Offset int
	Length int
}

// RemoteAddr is what a peer needs to address a region with RDMA Write and
// RDMA Read: its STag and a tagged offset. MR.Remote makes one.
type RemoteAddr struct {
	STag STag
	TO   uint64
}

// SendWR is a send-queue work request. It is copied when posted; the SGL
// slice may be reused at once, but the memory it names must not change (for
// Send and Write) or be read (for Read) until the completion. As in verbs,
// what a peer receives from memory changed too early is undefined; with
// CRC it is also sent under a CRC computed over other bytes, and the peer
// ends the connection. Memory of a region peers may write (RemoteWrite) is
// copied before it is framed, since their Writes can land at any moment.
type SendWR struct {
	ID     uint64
	Op     Op
	Flags  SendFlags
	SGL    []SGE
	Remote RemoteAddr // Write, Read
	// InvSTag is the peer's STag to invalidate (OpSendInv, OpSendSEInv) or
	// the local STag to invalidate (OpLocalInv).
	InvSTag STag
	// FlushLength is the length of the range an OpFlush names at Remote.
	FlushLength uint64
}

// RecvWR is a receive-queue work request: a buffer for one incoming Send.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}
