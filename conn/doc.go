// Package conn is the user API of iwarp-go: protection domains, registered
// memory regions, completion queues and queue pairs that carry RDMA Write,
// RDMA Read and Send/Receive over a TCP connection, speaking iWARP (RDMAP,
// DDP, MPA) the way the Linux soft-iWARP driver (siw) does.
//
// # Flow
//
//	pd := conn.NewPD()
//	mr, _ := pd.Register(buf, conn.LocalWrite|conn.RemoteWrite|conn.RemoteRead)
//	cq := conn.NewCQ(256)
//	qp, _ := pd.NewQP(cq, conn.QPCaps{})
//	qp.PostRecv(conn.RecvWR{ID: 1, SGL: []conn.SGE{mr.SGE(0, 4096)}}) // allowed before connecting
//	err := qp.Connect(ctx, "tcp", addr)                                // or Listen + AcceptRequest + Accept
//	qp.PostSend(conn.SendWR{ID: 2, Op: conn.OpWrite, Flags: conn.Signaled,
//		SGL: []conn.SGE{mr.SGE(0, 4096)}, Remote: peerAddr})
//	n, err := cq.Wait(ctx, wcs)
//
// Work requests and completions are plain values copied into fixed ring
// slots: posting and polling do not allocate. Posting never blocks on the
// network; it fails with ErrSQFull, ErrRQFull, ErrSRQFull or ErrCQFull
// when a queue, or the completion queue that must take the work's
// completion, is full (CQ room is reserved when work is posted, so the receive path never waits for
// the application; for a shared receive queue, when a queue pair takes the
// receive: see "Shared receive queues"). context.Context bounds connection
// setup and waits.
//
// # Concurrency
//
// Each connected queue pair runs one goroutine for as long as it is
// connected, the receiver, and a second, the transmitter, only while it has
// transmit work: a post or Read Request that cannot be written at once
// starts one (QP.kick), and it ends once it finds nothing more to do, so
// that an idle queue pair parks no goroutine but the one its socket needs.
// Starting one costs a goroutine creation (no heap allocation: the runtime
// reuses ended ones); inline posts, which write what the socket takes from
// the posting goroutine, need none. The receiver reads an FPDU
// and, with CRC (the default), verifies its CRC before acting on any of it
// (RFC 5044 §6), so that a damaged header can never steer bytes anywhere;
// it then validates the header (STag, protection domain, rights, bounds,
// MSN), copies the payload into registered memory and pushes the
// completion. Without CRC the payload goes straight from the socket into
// registered memory. The transmitter frames send-queue messages and Read
// Responses into batched writevs; MSNs are assigned under the lock that
// orders bytes onto the socket. Close ends both and completes outstanding
// work flushed in error (WCWRFlushErr, verbs' name); so does a peer's FIN,
// reset or Terminate, which QP.Done and QP.Err report even when no work is
// posted.
//
// # Locks and ownership
//
// Every piece of a connection's state has one owner:
//
//   - The receive token (a mutex): the FPDU reader, DDP receive state, the
//     Send or Read Response being placed, and how much of the oldest Read
//     Response has arrived. The receiver goroutine holds it while it reads;
//     any goroutine that holds it may receive (a graceful Close whose
//     receiver is running a completion handler does, and so does a
//     CQ.Wait on a CQ of one queue pair, which receives short FPDUs
//     itself while the receiver stands by — see CQ.Wait). A receiver
//     standing by takes the token back only with TryLock, when the
//     stand-by set's tick or a waiter's hand-back wakes it, so that it is
//     never woken by a waiter letting go of it.
//   - The transmit token (a mutex): the FPDU writer (inside TLS, with the
//     record stage beneath it and whether its writes may wait), the
//     message being segmented, the MSNs of
//     every queue (Sends and Immediate Data on 0; Read, Atomic and Flush
//     Requests on 1; Atomic and Flush Responses on 3) and the Request IDs.
//     The transmitter goroutine
//     holds it, and so may a posting goroutine (inline sends, which never
//     block), the receive token holder answering a Read Request, a
//     goroutine releasing a Read or Flush Response its hooks held
//     (ReadRelease, FlushRelease: a persist worker), or Close. Only the
//     transmitter waits for it (Lock); the others take it with TryLock
//     and, Close's drain aside, write without blocking, leaving what the
//     socket does not take to the transmitter.
//   - QP.mu: the queue pair's state, the send queue, the receive queue, the
//     outbound and inbound Read queues (Atomic and Flush Requests queue
//     there too), completions waiting for a handler.
//   - SRQ.mu: a shared receive queue's ring of posted receives, its count
//     of bound queue pairs and its armed limit. The receive token holder
//     of any bound queue pair takes a receive from it (under its QP.mu),
//     and posting takes it alone. A receive, once taken, belongs to that
//     queue pair (guarded by its QP.mu) until it completes.
//   - CQ.mu: the completion ring and the queue pairs completing on the
//     CQ. The count of slots held or promised to posted work (reserved at
//     posting, given back by unsignaled completions) is an atomic beside
//     it, so posting takes no CQ lock.
//   - The write-behind lock (a leaf; tlswb.go, inside TLS): the backlog of
//     sealed records beneath crypto/tls. crypto/tls writes into it under
//     its own write lock from whichever goroutine seals (a transmit token
//     holder, or the reading side answering a KeyUpdate), never waiting
//     for the socket; only the transmit token holder drains it, and
//     writes to the socket with the lock released and crypto/tls's not
//     held.
//   - The poke lock (a leaf, taken under any of the others): held by a
//     poke while it sets the past deadline that cuts the receive token
//     holder's wait between FPDUs (a completion pushed by another
//     goroutine, or the end of the Wait's context, cuts a CQ.Wait's socket
//     wait, which has no deadline of its own); the holder takes it only
//     after a cut, to clear the deadline after it. Whether the holder
//     waits (or was cut) and whether a poke came are atomics beside it;
//     the receive token owns the Wait's context registration.
//   - The stand-by set's lock (a leaf; standby.go): the process's list of
//     receivers standing by while Waits receive, and its one timer.
//   - A region's protection state is lock-free (package stag); a Watched
//     region's bytes are guarded by its own lock during placement. A
//     memory window's binding is a region of its own, published at the
//     window's STag index: lookups read it lock-free like any region;
//     binding, unbinding and invalidating a window take the stag table's
//     lock (a leaf), which a Send with Invalidate naming a window takes on
//     the receive path (mw.go).
//
// The lock order is receive token → transmit token → QP.mu → SRQ.mu →
// CQ.mu; the leaves (the write-behind lock, the poke lock, the stand-by
// set's lock, the stag table's lock, a Watched region's lock) take nothing
// under them. A token is only ever taken with
// TryLock while a later one is held. When a connection fails, whoever holds or next takes each token ends that
// token's role; the last role to end flushes the queues and closes the
// queue pair. Nothing waits for a particular goroutine, so a call that
// ends the connection returns even when the goroutines that usually hold
// the tokens are busy elsewhere.
//
// Completion handlers (WithCompletionHandler) run with no lock of the
// library held, one at a time per queue pair, in order, in whichever
// goroutine completed the work. A handler may call any method of the
// library, Close and Deregister included; it must not block, since the
// receiver or transmitter of its queue pair may be the goroutine running
// it. Close called from a handler (or while one runs) returns without
// waiting for that handler; the flushed completions follow when it returns.
//
// # Why the reading role moves between goroutines
//
// The simpler design gives the socket one reading owner, the receiver
// goroutine, which hands every completion to the goroutine waiting in
// CQ.Wait: one goroutine wake-up per message received. Measured, that
// hand-off was the largest cost of a round trip after its system calls:
// when iwarp-peer's waiter moved from selecting on CQ.Ready (the receiver
// reads and hands over) to CQ.Wait (the waiter reads its own FPDUs while
// the receiver stands by), the 8-byte Send ping-pong went from 1.60 to
// 1.25 times raw TCP's median, its p99 from 3.73 to 1.64 times; the
// receiver taking the token back only with TryLock, never woken by a
// waiter's Unlock, then took BenchmarkPingPong from 0.74 to 0.42 context
// switches and from 24.0 to 19.8 µs of CPU per round trip
// (docs/performance.md, "Latency: the goroutine hand-offs of a round
// trip"). Inline posts are the same choice on the sending side. So the
// reading role moves, and its price is the token protocol above: which
// goroutine reads is decided by TryLock, a receiver standing by returns on
// one process-wide timer, and every handover is covered by the race
// detector and the hostile suite. One owner per piece of state and one
// lock order are what keep it checkable.
//
// # Memory model
//
// Bytes the peer places into a registered region (by RDMA Write, Read
// Response or Send) are visible to the program after it has received the
// completion that covers them (a receive or Read completion), or — for RDMA
// Writes, which complete nothing at the target — after the completion of a
// later message from the same peer (the usual "write, then send a note"
// pattern). Reading a region while the peer may be writing into it is a
// data race, and so is changing the memory of a Send or Write before its
// completion. Conversely, the program may reuse memory once it has told the
// peer so through a later post on the same queue pair: the placements that
// follow are ordered after that post.
//
// # What iWARP does that a verbs programmer may not expect
//
// iWARP has no receiver-not-ready retry and no remote acknowledgement of a
// message: a Send or an RDMA Write completes successfully as soon as it has
// been handed to TCP. So:
//
//   - A Send that arrives when the peer has no receive posted completes
//     successfully here, and the peer then ends the connection with a
//     Terminate ("no buffer available"): Done fires, later work is flushed.
//     Post receives before the peer may send, and keep them posted.
//   - An RDMA Write to a region the peer did not open for remote writing
//     (or to an unknown or invalidated STag, or out of its bounds) also
//     completes successfully here, then ends the connection the same way.
//   - Only an RDMA Read waits for the peer: an access error there completes
//     the Read with WCRemAccessErr (wc.Err wraps the peer's Terminate).
//
// The memory of a Send or Write may be reused once it completes, but its
// arrival at the peer is known only from a later message of the peer's.
//
// # Interoperability
//
// Defaults follow what Linux siw expects (see docs/rfc-notes/conn.md): MPA
// revision 2 with the RFC 6581 IRD/ORD block, CRC preferred (siw follows the
// initiator's choice), no markers toward siw, peer-to-peer mode with a
// zero-length RDMA Write RTR, FPDUs that fit the TCP MSS toward unknown
// peers, and a short hold-back of the initiator's first FPDU toward peers
// that are not iwarp-go (siw may not yet be listening on the connection
// when its Reply arrives). Two iwarp-go peers recognise each other in the
// MPA private data and use 64 KiB FPDUs with no hold-back.
//
// # Shared receive queues
//
// A queue pair created with QPCaps.SRQ takes its receives from a shared
// receive queue (PD.NewSRQ, SRQ.PostRecv) that many queue pairs draw on,
// possibly completing on different CQs. Which queue pair consumes a
// receive is unknown when it is posted, so SRQ.PostRecv reserves no CQ
// room. The receive is taken from the SRQ, and a slot reserved on the
// taking queue pair's receive CQ, when the first segment of a Send
// arrives on that queue pair; the rest of the message goes into the same
// receive, whatever other queue pairs take meanwhile. If that CQ is full,
// the receive stays on the SRQ for the other queue pairs and the
// connection ends with an RDMAP Local Catastrophic Error Terminate, its
// error wrapping ErrCQFull: the CQ overrun that verbs reports as a fatal
// queue-pair error. Size each CQ for the receive completions its queue
// pairs may leave unpolled, plus their send work. This
// keeps CQs independent of the SRQ, as in verbs, where a shared CQ per SRQ
// would have been the only way to reserve at posting; and a taken receive
// costs exactly one slot, whichever CQ it lands on.
//
// When a bound queue pair closes or fails, only the receive its message in
// progress had taken is completed, with WCWRFlushErr on its CQ; the SRQ's
// other receives stay posted for the remaining queue pairs. SRQ.Close
// fails while queue pairs that are not closed are bound to it, and
// otherwise drops the receives still posted, with no completion.
//
// # Memory windows
//
// A memory window (PD.AllocMW) lends a peer a range of a region registered
// with MWBind, with a subset of its remote rights, under its own STag. To
// the peer it is an STag like any other, so windows work toward siw too.
// Type 1 windows are bound by the verb MW.Bind; type 2 windows by an
// OpBindMW work request, in send-queue order, and only the peer of that
// queue pair may use them or invalidate them with a Send with Invalidate
// (RFC 5040 §8.1.1 items 2 and 7). A region with windows bound can be
// neither invalidated nor deregistered. docs/rfc-notes/rfc5040.md, rows
// W1–W8, has the rules and the Terminates.
//
// # Extensions between iwarp-go peers
//
// The same private-data trailer carries the extensions each side accepts
// (rdmap.Extensions); one is used when both declare it, and each of its
// opcodes is an entry of the engine's opcode tables with its handlers.
// The Flush extension (OpFlush, docs/rfc-notes/flush-extension.md) and RFC
// 7306 (OpFetchAdd, OpCmpSwap on regions registered with RemoteAtomic;
// OpWriteImm, OpSendImm and WCWithImm receive completions;
// docs/rfc-notes/rfc7306.md) are the two. Toward other peers OpFlush
// completes with ErrFlushUnsupported and the RFC 7306 operations fail at
// post time with ErrRFC7306Unsupported; their opcodes arriving on a
// connection that did not negotiate them end it with the Terminate of an
// unknown opcode (0/2/0x06), as siw does. An atomic is carried out with
// sync/atomic on the target word, so it is atomic against every other
// atomic of the process on that word; an RDMA Write into the same word is
// not (an aligned 8-byte Write is one store, a longer one may be seen in
// part).
//
// Adding an opcode touches: rdmap/opcode.go (its constant and its entry
// of the opcode table, whose name dissect prints and whose label the
// metrics use), the rdmap file of its extension (encoder, header view,
// parse rules), conn/rx.go (its rxTable and commitTable entries) and the
// conn file of its handlers; if a work request sends it, conn/wr.go (the
// Op) and conn/ops.go (its sendOps entry), and conn/wc.go (a WCOpcode and
// its wcOpNames entry) if it completes as none before; and, if its header
// has fields of its own, dissect's RDMAP layer (layer_rdmap.go: a field,
// and a SerializeTo case) and report (report.go, stream.go, text.go).
// Per-opcode counters, metrics labels, dissect's opcode names, and the
// receive checks of its T flag, queue number, header length and extension
// follow from the table.
//
// # Inside TLS
//
// Between iwarp-go peers, WithTLS runs the connection inside crypto/tls:
// the TLS handshake is the first step of setup and MPA, DDP and RDMAP run
// unchanged inside the stream; QP.TLSState shows the peer's certificates.
// It exists because RFC 5042 leaves protection of the stream to IPsec,
// which few deployments run; siw and RDMA NICs speak iWARP over bare TCP
// only. The MPA CRC is negotiated as without TLS (on by default, RFC 5044
// §4.4); since TLS authenticates every byte, WithCRC(CRCOff) on both ends
// is sound inside TLS and saves a CRC32c pass. Beneath crypto/tls a
// write-behind layer takes sealed records without waiting for the socket
// (one non-blocking attempt, the rest in a backlog of at most 1 MiB that
// the transmitter drains), so that a posting goroutine seals and sends a
// short message itself as over bare TCP, and a peer that stops reading
// holds up neither it nor the reading side answering a TLS 1.3 KeyUpdate;
// crypto/tls's own writes past the bound end the connection. A *tls.Conn
// given to Client or Server has no such layer: its messages go through
// the transmitter. The other socket-level fast paths (readv, writev, the
// buffer-free idle wait) give way to the portable ones; socket options go
// to the TCP connection beneath, a tap records the plaintext above TLS,
// and Close closes TCP without a close_notify alert, whose write crypto/tls
// would let a peer that stops reading hold up for five seconds.
package conn
