package conn

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/rdmap"
)

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
	// OpLocalInv invalidates the local STag InvSTag, in send-queue order:
	// a region's, or a type 2 memory window's bound through this queue
	// pair (a type 1 window's, or another queue pair's window's, completes
	// with WCLocProtErr, as in verbs).
	OpLocalInv
	// OpFlush asks an iwarp-go peer to make the range of FlushLength bytes
	// at Remote persistent and visible, and completes once it answered
	// that every RDMA Write sent before it on this queue pair is (the Flush
	// extension, docs/rfc-notes/flush-extension.md). Its completion has
	// WCFlushPersistent set only when the peer declared the bytes durable.
	// Toward a peer without the extension it completes with WCLocQPOpErr
	// (ErrFlushUnsupported); package pmemsink's Flush chooses for you.
	OpFlush
	// OpFetchAdd atomically adds Atomic.AddSwap to the 8-byte word at
	// Remote (8-byte aligned, in a region the peer registered with
	// RemoteAtomic), in the fields Atomic.AddSwapMask delimits (0: one
	// 64-bit addition), and places the word's previous value into the
	// SGL: one 8-byte SGE (RFC 7306 Atomic FetchAdd). Remote.TO must be
	// 8-aligned. Between iwarp-go peers only (QP.PeerAtomics); toward
	// any other peer PostSend fails with ErrRFC7306Unsupported.
	OpFetchAdd
	// OpCmpSwap atomically compares the word at Remote with
	// Atomic.Compare in the bits of Atomic.CompareMask and, if equal
	// there, replaces the bits of Atomic.AddSwapMask with Atomic.AddSwap;
	// the previous value is placed into the SGL as for OpFetchAdd.
	// FetchAdd and CmpSwap make the unmasked operations.
	OpCmpSwap
	// OpWriteImm is an RDMA Write followed by an RFC 7306 Immediate Data
	// message carrying Imm: the peer's next receive completes with
	// WCWithImm and Imm once the Write's bytes are placed.
	OpWriteImm
	// OpSendImm sends an Immediate Data message carrying Imm (with the
	// Solicited flag, Immediate Data with Solicited Event): it takes no
	// SGL and consumes the peer's next receive, which completes with
	// WCWithImm, Imm and ByteLen 0. RFC 7306 has no Send that carries both
	// data and an immediate value.
	OpSendImm
	// OpBindMW binds the type 2 memory window MW as Bind says, in
	// send-queue order (verbs' IBV_WR_BIND_MW), and ties it to this queue
	// pair: peers reach it through this connection only. It takes no SGL,
	// puts nothing on the wire and completes with WCBindMW, or with
	// WCMWBindErr if the window or region refuses the bind (MW.Bind).
	OpBindMW
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

// AtomicArgs are the operands of OpFetchAdd and OpCmpSwap (RFC 7306
// §5.2.1; rdmap.AtomicOp.Apply gives the arithmetic).
type AtomicArgs = rdmap.AtomicArgs

// FetchAdd returns the operands of an unmasked FetchAdd of add.
func FetchAdd(add uint64) AtomicArgs { return AtomicArgs{AddSwap: add} }

// CmpSwap returns the operands of an unmasked compare-and-swap: if the
// word equals compare, it becomes swap.
func CmpSwap(compare, swap uint64) AtomicArgs {
	return AtomicArgs{AddSwap: swap, AddSwapMask: ^uint64(0), Compare: compare, CompareMask: ^uint64(0)}
}

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
	// Imm is the immediate data of OpWriteImm and OpSendImm.
	Imm uint64
	// Atomic holds the operands of OpFetchAdd and OpCmpSwap.
	Atomic AtomicArgs
	// MW and Bind are the window and the binding of OpBindMW.
	MW   *MW
	Bind BindInfo
}

// RecvWR is a receive-queue work request: a buffer for one incoming Send.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}
