package mpa

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"slices"
	"sync"
)

// WriterConfig selects the FPDU options negotiated for the direction a
// Writer sends: CRC is Result.CRC, Markers is Result.SendMarkers.
type WriterConfig struct {
	CRC     bool
	Markers bool
}

// Writer frames ULPDUs into FPDUs and queues them as net.Buffers; Flush
// sends everything queued with one writev (on a *net.TCPConn).
//
// Header bytes are copied into storage the Writer takes from a free list
// shared by all Writers and gives back once everything queued is written,
// so an idle Writer holds none. Payload slices given to Payload are
// referenced, not copied, and must stay unchanged until Flush returns
// (with CRC, bytes that change in between go out with a CRC computed over
// other bytes) — except small ones (up to 256 bytes), which are copied in
// behind their header so that a small FPDU goes out as one piece. PayloadCopy copies always, for
// memory others may change meanwhile. In steady state nothing is allocated
// per FPDU.
//
// The Writer must see the direction's FPDU stream from its first byte:
// marker positions count from there (RFC 5044 §4.3). It is not safe for
// concurrent use.
type Writer struct {
	w   io.Writer
	bw  BuffersWriter // w, when it takes a batch at once
	cfg WriterConfig

	bufs net.Buffers // queued iovecs
	out  net.Buffers // Flush's working copy (a field, so WriteTo does not allocate)
	a    arena
	st   stage // PayloadCopy's copies

	// FPDU being built
	open  bool
	hdr   span     // length field + header
	pend  [][]byte // payload pieces
	ulpdu int

	last span // arena storage behind the last iovec, if any (n > 0)

	pos    int64 // stream bytes queued since the first FPDU
	queued int   // bytes queued since the last Flush
	fpdus  int   // FPDUs queued since the last Flush
	err    error // sticky write error

	// Since the last time the queue was empty (reset): stream position
	// then, bytes queued, bytes written, and the queue offset of each FPDU
	// end — what Abandon needs to know whether the stream stopped at an
	// FPDU boundary.
	base  int64
	total int
	sent  int
	ends  []int

	// TryFlush's non-blocking writev, where the system has it
	// (writer_linux.go).
	wv writevState
}

// BuffersWriter is a writer that takes a whole batch of pieces in one
// call, the way net.Buffers hands a socket to writev. Flush gives such a
// writer everything queued at once instead of a Write per piece: a TLS
// stream, for one, then seals the batch into full records rather than a
// record per FPDU header, payload and CRC. WriteBuffers must not keep bufs
// or its slices after it returns.
type BuffersWriter interface {
	WriteBuffers(bufs [][]byte) (int64, error)
}

// NewWriter returns a Writer that sends on w.
func NewWriter(w io.Writer, cfg WriterConfig) *Writer {
	wr := &Writer{w: w, cfg: cfg}
	wr.bw, _ = w.(BuffersWriter)
	wr.initWritev()
	return wr
}

// Begin starts an FPDU whose ULPDU opens with hdr (the DDP/RDMAP header,
// at most MaxHeader bytes), which is copied.
func (w *Writer) Begin(hdr []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.open {
		return fmt.Errorf("%w: Begin before End", ErrState)
	}
	if len(hdr) > MaxHeader {
		return fmt.Errorf("%w: %d-byte header, at most %d", ErrState, len(hdr), MaxHeader)
	}
	w.hdr = w.a.allocHeader(lengthLen + len(hdr))
	b := w.a.bytes(w.hdr)
	copy(b[lengthLen:], hdr)
	w.ulpdu = len(hdr)
	w.pend = w.pend[:0]
	w.open = true
	return nil
}

// Payload adds p to the FPDU's ULPDU by reference; it may be called any
// number of times (scatter/gather). A ULPDU over 65535 bytes drops the
// FPDU and returns ErrFPDUTooLong.
func (w *Writer) Payload(p []byte) error {
	if !w.open {
		return fmt.Errorf("%w: Payload without Begin", ErrState)
	}
	if limit := w.maxULPDU(); w.ulpdu+len(p) > limit {
		n := w.ulpdu + len(p)
		w.abort()
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFPDUTooLong, n, limit)
	}
	if len(p) > 0 && !w.inline(p) {
		w.pend = append(w.pend, p)
		w.ulpdu += len(p)
	}
	return nil
}

// inlinePayload is the longest payload piece copied in behind its header
// rather than queued by reference. A small FPDU then goes out as one iovec
// (several of them in a batch too, since adjacent storage merges), which
// the kernel copies and checks once, instead of three: for an 8-byte Send
// that is a tenth of the round trip's system time.
const inlinePayload = 256

// inline copies p into the arena right behind the FPDU's header when p is
// small, every earlier piece was inlined too (the order of the ULPDU's
// bytes is the order of its storage) and the small block or the first
// half of the first shared one has room: copies never make the arena
// grow, and every Writer's arena holds as many blocks as its headers
// alone would need, give or take one.
func (w *Writer) inline(p []byte) bool {
	if len(p) > inlinePayload || len(w.pend) > 0 || !w.a.extend(&w.hdr, len(p)) {
		return false
	}
	b := w.a.bytes(w.hdr)
	dmaCopy(b[len(b)-len(p):], p)
	w.ulpdu += len(p)
	return true
}

// PayloadCopy is Payload for memory that may change before the FPDU is
// written — a region peers can write, or one the application keeps
// writing while peers read it: p is copied into storage of the Writer's,
// so that the CRC covers exactly the bytes sent. The storage comes in
// 64 KiB blocks from a pool shared by every Writer and goes back when
// everything queued has been written (Staged says how much is held).
func (w *Writer) PayloadCopy(p []byte) error {
	if !w.open {
		return fmt.Errorf("%w: PayloadCopy without Begin", ErrState)
	}
	if limit := w.maxULPDU(); w.ulpdu+len(p) > limit {
		return w.Payload(p) // the same refusal
	}
	if w.inline(p) {
		return nil
	}
	for len(p) > 0 {
		q := w.st.copy(p)
		w.pend = append(w.pend, q)
		w.ulpdu += len(q)
		p = p[len(q):]
	}
	return nil
}

// Staged returns the payload bytes PayloadCopy holds for FPDUs not yet
// written.
func (w *Writer) Staged() int { return w.st.n }

// End completes the FPDU: it fills in the length, adds pad and the CRC
// field (CRC32c over length field, ULPDU, pad and any markers, stored
// little-endian; zero when CRC is off) and inserts markers if enabled.
func (w *Writer) End() error {
	if !w.open {
		return fmt.Errorf("%w: End without Begin", ErrState)
	}
	w.open = false
	start := w.pos
	hdr := w.a.bytes(w.hdr)
	binary.BigEndian.PutUint16(hdr, uint16(w.ulpdu))
	pad := padLen(w.ulpdu)
	trailer := w.a.alloc(pad + crcLen)
	tb := w.a.bytes(trailer)
	clear(tb)
	if w.cfg.Markers {
		w.endWithMarkers(hdr, tb, pad)
	} else {
		if w.cfg.CRC {
			c := crc32.Update(0, castagnoli, hdr)
			for _, p := range w.pend {
				c = crc32.Update(c, castagnoli, p)
			}
			c = crc32.Update(c, castagnoli, tb[:pad])
			binary.LittleEndian.PutUint32(tb[pad:], c)
		}
		w.pushArena(w.hdr)
		for _, p := range w.pend {
			w.push(p)
		}
		w.pushArena(trailer)
		w.pos += int64(lengthLen + w.ulpdu + pad + crcLen)
	}
	w.fpdus++
	w.total += int(w.pos - start)
	w.ends = append(w.ends, w.total)
	clear(w.pend) // drop references to the caller's memory early
	w.pend = w.pend[:0]
	return nil
}

// endWithMarkers lays the FPDU out in stream order, inserting a marker
// wherever the stream position is a multiple of 512 (RFC 5044 §4.3). A
// marker at the very start of the FPDU precedes the length field and has
// FPDUPTR 0; a later one holds its distance back to the length field. The
// CRC covers the markers.
func (w *Writer) endWithMarkers(hdr, trailer []byte, pad int) {
	start := w.pos
	lenField := start
	if start%markerInterval == 0 {
		lenField += markerLen
	}
	var c uint32
	sum := func(p []byte) {
		if w.cfg.CRC {
			c = crc32.Update(c, castagnoli, p)
		}
	}
	marker := func() {
		m := w.a.bytes(w.a.alloc(markerLen))
		putMarker(m, w.pos, start, lenField)
		sum(m)
		w.push(m)
		w.pos += markerLen
	}
	emit := func(p []byte) {
		for len(p) > 0 {
			if w.pos%markerInterval == 0 {
				marker()
			}
			n := min(len(p), int(markerInterval-w.pos%markerInterval))
			sum(p[:n])
			w.push(p[:n])
			w.pos += int64(n)
			p = p[n:]
		}
	}
	emit(hdr)
	for _, p := range w.pend {
		emit(p)
	}
	emit(trailer[:pad])
	if w.pos%markerInterval == 0 {
		// A marker due before the CRC field goes there, so the CRC covers it.
		marker()
	}
	if w.cfg.CRC {
		binary.LittleEndian.PutUint32(trailer[pad:], c)
	}
	w.push(trailer[pad:])
	w.pos += crcLen
}

// putMarker writes the marker found at stream position at, within the FPDU
// that starts at start and whose length field is at lenField.
func putMarker(m []byte, at, start, lenField int64) {
	var ptr uint16
	if at != start {
		ptr = uint16(at - lenField)
	}
	m[0], m[1] = 0, 0
	binary.BigEndian.PutUint16(m[2:], ptr)
}

// push queues a payload slice (or any slice not worth merging).
func (w *Writer) push(p []byte) {
	w.queued += len(p)
	w.bufs = append(w.bufs, p)
	w.last = span{}
}

// pushArena queues arena storage, extending the previous iovec when it
// ends where s starts: a trailer and the next FPDU's header then go out as
// one iovec.
func (w *Writer) pushArena(s span) {
	w.queued += s.n
	if n := len(w.bufs); n > 0 && w.last.n > 0 && w.last.chunk == s.chunk && w.last.off+w.last.n == s.off {
		w.last.n += s.n
		w.bufs[n-1] = w.a.bytes(w.last)
		return
	}
	w.bufs = append(w.bufs, w.a.bytes(s))
	w.last = s
}

func (w *Writer) maxULPDU() int {
	if w.cfg.Markers {
		return MaxULPDUWithMarkers
	}
	return MaxULPDU
}

func (w *Writer) abort() {
	w.open = false
	clear(w.pend)
	w.pend = w.pend[:0]
	if len(w.bufs) == 0 {
		// Only the dropped FPDU's header was in the arena.
		w.a.release()
	}
}

// WriteFPDU queues one FPDU made of hdr and the payload pieces.
func (w *Writer) WriteFPDU(hdr []byte, payload ...[]byte) error {
	if err := w.Begin(hdr); err != nil {
		return err
	}
	for _, p := range payload {
		if err := w.Payload(p); err != nil {
			return err
		}
	}
	return w.End()
}

// Buffered returns the number of bytes queued since the last Flush.
func (w *Writer) Buffered() int { return w.queued }

// Pending returns the number of FPDUs queued since the last Flush.
func (w *Writer) Pending() int { return w.fpdus }

// StreamOffset returns the number of stream bytes (markers included) in
// the FPDUs queued or sent so far: the position of the next FPDU.
func (w *Writer) StreamOffset() int64 { return w.pos }

// Flush writes everything queued, as one writev where the underlying
// writer supports it (one WriteBuffers for a BuffersWriter). After a write error the Writer is unusable: part of
// an FPDU may have reached the peer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if w.open {
		return fmt.Errorf("%w: Flush inside an FPDU", ErrState)
	}
	if len(w.bufs) == 0 {
		return nil
	}
	var err error
	if w.bw != nil {
		_, err = w.bw.WriteBuffers(w.bufs)
	} else {
		w.out = w.bufs
		_, err = w.out.WriteTo(w.w)
		w.out = nil
	}
	w.reset()
	if err != nil {
		w.err = fmt.Errorf("mpa: writing FPDUs: %w", err)
		return w.err
	}
	return nil
}

// TryFlush writes what is queued without waiting for the socket: whatever
// the kernel takes now goes out, the rest stays queued for a later TryFlush
// or Flush. It reports whether everything was written. This lets a caller
// that must not block (a goroutine posting work) send at once when the
// socket has room, and leave the rest to a goroutine that may block.
//
// It needs a writer that exposes its socket (syscall.Conn, as *net.TCPConn
// does) and, for now, Linux, where it is one non-blocking writev. For any
// other writer, and on other systems, it writes nothing and returns false:
// everything stays queued for Flush.
func (w *Writer) TryFlush() (bool, error) {
	if w.err != nil {
		return false, w.err
	}
	if w.open {
		return false, fmt.Errorf("%w: TryFlush inside an FPDU", ErrState)
	}
	if len(w.bufs) == 0 {
		return true, nil
	}
	n, tried, err := w.tryWritev()
	if !tried {
		return false, nil
	}
	if err != nil {
		w.err = fmt.Errorf("mpa: writing FPDUs: %w", err)
		return false, w.err
	}
	w.consume(n)
	if len(w.bufs) > 0 {
		return false, nil
	}
	w.reset()
	return true, nil
}

// consume drops the first n written bytes from the queue.
func (w *Writer) consume(n int) {
	if n == 0 {
		return
	}
	w.sent += n
	w.queued -= n
	i := 0
	for i < len(w.bufs) && n >= len(w.bufs[i]) {
		n -= len(w.bufs[i])
		i++
	}
	if i < len(w.bufs) && n > 0 {
		w.bufs[i] = w.bufs[i][n:]
	}
	k := copy(w.bufs, w.bufs[i:])
	clear(w.bufs[k:])
	w.bufs = w.bufs[:k]
	// The last iovec may have been trimmed or moved: never extend it.
	w.last = span{}
}

// reset forgets everything queued once it has all been written.
func (w *Writer) reset() {
	clear(w.bufs)
	w.bufs = w.bufs[:0]
	w.last = span{}
	w.a.release()
	w.st.release()
	w.queued, w.fpdus = 0, 0
	w.base, w.total, w.sent = w.pos, 0, 0
	w.ends = w.ends[:0]
}

// Abandon drops every FPDU queued and not yet written, and the FPDU being
// built. It reports whether the bytes already written end at an FPDU
// boundary, that is, whether another FPDU (a Terminate) may still follow
// on the stream; after a write error none may. The Writer stays usable
// when it reports true.
func (w *Writer) Abandon() bool {
	w.abort()
	atBoundary := w.err == nil && (w.sent == 0 || slices.Contains(w.ends, w.sent))
	if atBoundary {
		w.pos = w.base + int64(w.sent)
	}
	w.reset()
	return atBoundary
}

// arenaChunk is the size of each block of header storage.
const arenaChunk = 8192

// span locates n bytes at off in arena block chunk.
type span struct {
	chunk, off, n int
}

// arena hands out header, trailer and marker storage from fixed blocks.
// Blocks never move or grow, so slices already queued stay valid when more
// storage is needed. The first block is the arena's own small one, which
// holds a batch of a few small FPDUs (a ping-pong's message, a Write and
// the Send that announces it); further blocks come from arenaFree and go
// back to it once the queue has been written, so a Writer that is idle
// holds only the small block: with thousands of idle connections, an
// 8 KiB block each would be most of their memory. Taking a shared block
// for every small batch cost a ping-pong two locks on a mutex shared by
// every connection, whose cache line moved between the cores each time.
// chunks[0] points into the arena itself, so a used arena (and the Writer
// holding it) must not be copied.
type arena struct {
	small  [arenaSmall]byte
	chunks [][]byte // chunks[0] is small[:] once anything was allocated
	cur    int      // block in use
	off    int      // next free byte in it
}

// arenaSmall is the size of the arena's own first block.
const arenaSmall = 512

// arenaFreeMax bounds the blocks kept for reuse (512 KiB): enough for many
// connections flushing at once, little next to what they need anyway.
const arenaFreeMax = 64

// arenaFree is a bounded free list of arena blocks shared by all Writers.
// It is a list rather than a sync.Pool so that a Writer taking a block per
// batch allocates nothing in steady state: a pool is emptied by the
// collector, and drops items on purpose under the race detector.
var arenaFree struct {
	sync.Mutex
	blocks [][]byte
}

func getArenaBlock() []byte {
	arenaFree.Lock()
	if n := len(arenaFree.blocks); n > 0 {
		b := arenaFree.blocks[n-1]
		arenaFree.blocks[n-1] = nil
		arenaFree.blocks = arenaFree.blocks[:n-1]
		arenaFree.Unlock()
		return b
	}
	arenaFree.Unlock()
	return make([]byte, arenaChunk)
}

func putArenaBlocks(bs [][]byte) {
	arenaFree.Lock()
	if arenaFree.blocks == nil {
		arenaFree.blocks = make([][]byte, 0, arenaFreeMax)
	}
	for _, b := range bs {
		if len(arenaFree.blocks) == arenaFreeMax {
			break
		}
		arenaFree.blocks = append(arenaFree.blocks, b)
	}
	arenaFree.Unlock()
}

func (a *arena) alloc(n int) span {
	if len(a.chunks) == 0 {
		a.chunks = append(a.chunks, a.small[:])
	}
	if a.off+n > len(a.chunks[a.cur]) {
		a.cur++
		if a.cur == len(a.chunks) {
			a.chunks = append(a.chunks, getArenaBlock())
		}
		a.off = 0
	}
	s := span{chunk: a.cur, off: a.off, n: n}
	a.off += n
	return s
}

// allocHeader is alloc for an FPDU's header, which small payloads are
// copied in behind: a header that would leave the small block without
// room for a short payload and its trailer starts the next block instead.
func (a *arena) allocHeader(n int) span {
	if a.cur == 0 && len(a.chunks) > 0 && a.off+n+smallHeadroom > arenaSmall {
		a.off = arenaSmall
	}
	return a.alloc(n)
}

// smallHeadroom is the room a header leaves behind it in the small block.
const smallHeadroom = 64

// bytes returns the storage of s, with its capacity capped so that appends
// by anyone cannot spill into neighbouring storage.
func (a *arena) bytes(s span) []byte {
	return a.chunks[s.chunk][s.off : s.off+s.n : s.off+s.n]
}

// extend grows s, the arena's latest allocation, by n bytes in place if
// that keeps it in the small block or in the first half of the first
// shared one.
func (a *arena) extend(s *span, n int) bool {
	if a.cur > 1 || s.chunk != a.cur || s.off+s.n != a.off {
		return false
	}
	if limit := len(a.chunks[a.cur]); a.off+n > limit || (a.cur == 1 && a.off+n > limit/2) {
		return false
	}
	a.off += n
	s.n += n
	return true
}

// release gives every shared block back to arenaFree and keeps the small
// one; nothing may still refer to them.
func (a *arena) release() {
	if len(a.chunks) > 1 {
		putArenaBlocks(a.chunks[1:])
		clear(a.chunks[1:])
		a.chunks = a.chunks[:1]
	}
	a.cur, a.off = 0, 0
}

// stageBlock is the size of PayloadCopy's storage blocks.
const stageBlock = 64 << 10

var stagePool = sync.Pool{New: func() any { b := make([]byte, stageBlock); return &b }}

// stage holds payload copies in blocks taken from stagePool. Blocks never
// move, so slices already queued stay valid as more is staged; all go back
// to the pool when the queue has been written, so a Writer that is idle,
// or never stages, holds none.
type stage struct {
	blocks []*[]byte
	off    int // next free byte in the last block
	n      int // bytes staged
}

// copy copies as much of p as fits in the current block (taking a new
// block when it is full) and returns the copy.
func (s *stage) copy(p []byte) []byte {
	if len(s.blocks) == 0 || s.off == stageBlock {
		s.blocks = append(s.blocks, stagePool.Get().(*[]byte))
		s.off = 0
	}
	b := *s.blocks[len(s.blocks)-1]
	k := dmaCopy(b[s.off:], p)
	q := b[s.off : s.off+k : s.off+k]
	s.off += k
	s.n += k
	return q
}

func (s *stage) release() {
	for i, b := range s.blocks {
		stagePool.Put(b)
		s.blocks[i] = nil
	}
	s.blocks = s.blocks[:0]
	s.off, s.n = 0, 0
}
