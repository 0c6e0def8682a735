package mpa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// ReaderConfig selects the FPDU options negotiated for the direction a
// Reader receives: CRC is Result.CRC, Markers is Result.RecvMarkers.
type ReaderConfig struct {
	CRC     bool
	Markers bool
	// MaxULPDU refuses longer FPDUs before reading them; zero means 65535.
	MaxULPDU int
	// BufferSize is the internal buffer's fixed size; zero means 64 KiB.
	// It is at least 1 KiB.
	BufferSize int
	// ContinueAfterCRCError lets the next FPDU be read after one failed its
	// CRC check. It is for decoders of captured streams, which report
	// every FPDU: a connection must not set it. By default a CRC error
	// ends the stream like any other error, as RFC 5044 §8 requires:
	// "Once MPA delivers an error of any type, it MUST NOT pass or deliver
	// any additional FPDUs on that half connection."
	ContinueAfterCRCError bool
	// ReleaseIdle returns the buffer to a pool shared by every Reader of
	// the same buffer size whenever the Reader waits between FPDUs with
	// nothing buffered, and takes one when data arrives: an idle stream
	// holds no buffer (thousands of idle connections hold none). It takes
	// effect on sockets where the Reader has its fast path (Linux) and
	// without markers; elsewhere the Reader keeps its buffer.
	ReleaseIdle bool
	// VerifyFirst makes Next read the whole FPDU and check its CRC before
	// it returns, as RFC 5044 §6 requires of a receiver ("An MPA receiver
	// MUST first verify the FPDU before passing the ULPDU to DDP"): no
	// byte of an FPDU whose CRC fails reaches the caller, and no header
	// field of it is acted on. The payload then reaches the caller by a
	// copy from the buffer, which grows to hold the longest FPDU allowed.
	// Without it, payload goes straight from the socket into the caller's
	// buffer and the CRC is checked at End (cut-through, as siw does). It
	// takes effect with CRC on and without ContinueAfterCRCError.
	VerifyFirst bool
}

// DefaultReaderBuffer is the Reader's buffer size unless configured.
const DefaultReaderBuffer = 64 << 10

// directRead is the smallest payload read that bypasses the buffer when
// the buffer is empty: below it, filling the buffer lets one read system
// call serve several FPDUs.
const directRead = 4096

// verifyAhead is how many of the longest FPDUs a VerifyFirst buffer
// holds. Every FPDU passes through the buffer then; one that held a
// single FPDU took one read system call per FPDU, about four times the
// calls a plain stream makes per MiB on loopback, each freeing receive
// window and so costing an ACK. Four let one read take what the socket
// holds; the buffer (256 KiB) still sits in L2 between the read, the CRC
// pass and the copy out.
const verifyAhead = 4

// Reader takes FPDUs off a byte stream one at a time:
//
//	n, err := r.Next()      // the ULPDU length
//	h, err := r.Peek(14)    // the DDP/RDMAP header, without copying
//	err = r.ReadFull(dst)   // payload straight into the destination
//	err = r.End()           // pad and CRC; the CRC is checked here
//
// Payload reads that find the buffer empty go straight from the
// underlying reader into the destination; on Linux, when the reader
// exposes its socket (syscall.Conn, as *net.TCPConn does), one readv also
// brings in what follows the payload. With markers enabled they are
// removed transparently (Peek never shows them) and checked against the
// FPDU; the payload then passes through the buffer.
//
// The buffer is allocated once; nothing is allocated per FPDU and nothing
// is sized by the peer. The Reader must see the direction's FPDU stream
// from its first byte. It is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	cfg ReaderConfig
	buf []byte
	rp  int // buf[rp:wp] holds logical (marker-free) bytes
	wp  int

	inFPDU   bool
	verified bool // the FPDU's CRC was checked in Next (VerifyFirst)
	remain   int  // ULPDU bytes not consumed yet
	ulpdu    int
	crc      uint32

	ioErr  error // error from r, returned once the buffer is drained
	broken error // the error that ended the stream (RFC 5044 §8); returned from then on
	empty  int   // consecutive reads that returned nothing and no error

	m markerState

	// Direct payload reads on a socket use readv where the system has the
	// fast path (reader_linux.go): the payload goes to the caller and
	// whatever follows it (pad, CRC, the next FPDU's header) into the
	// buffer, one system call instead of two.
	rv readvState

	// pool holds the buffer while the stream is idle (ReleaseIdle); bufp
	// is the pool's handle of the buffer in use.
	pool *sync.Pool
	bufp *[]byte
}

// bufferPools are the pools of idle Readers' buffers, by size.
var bufferPools sync.Map // int → *sync.Pool

func bufferPool(size int) *sync.Pool {
	if p, ok := bufferPools.Load(size); ok {
		return p.(*sync.Pool)
	}
	p, _ := bufferPools.LoadOrStore(size, &sync.Pool{New: func() any { b := make([]byte, size); return &b }})
	return p.(*sync.Pool)
}

// NewReader returns a Reader of the FPDU stream in r.
func NewReader(r io.Reader, cfg ReaderConfig) *Reader {
	if cfg.MaxULPDU <= 0 || cfg.MaxULPDU > MaxULPDU {
		cfg.MaxULPDU = MaxULPDU
	}
	if cfg.BufferSize == 0 {
		cfg.BufferSize = DefaultReaderBuffer
	}
	cfg.BufferSize = max(cfg.BufferSize, 1024)
	cfg.VerifyFirst = cfg.VerifyFirst && cfg.CRC && !cfg.ContinueAfterCRCError
	if cfg.VerifyFirst {
		cfg.BufferSize = max(cfg.BufferSize, verifyAhead*FPDULen(cfg.MaxULPDU))
	}
	rd := &Reader{r: r, cfg: cfg}
	rd.initReadv()
	if cfg.ReleaseIdle && !cfg.Markers && rd.canAwaitIdle() {
		rd.pool = bufferPool(cfg.BufferSize)
	} else {
		rd.buf = make([]byte, cfg.BufferSize)
	}
	if cfg.Markers {
		rd.m.init(cfg.BufferSize)
	}
	return rd
}

// Next starts the next FPDU and returns its ULPDU length. At a clean end
// of stream between FPDUs it returns io.EOF. The previous FPDU must have
// been finished with End.
func (r *Reader) Next() (int, error) {
	if r.broken != nil {
		return 0, r.broken
	}
	if r.inFPDU {
		return 0, fmt.Errorf("%w: Next before End", ErrState)
	}
	if err := r.fill(lengthLen, true); err != nil {
		return 0, err
	}
	r.crc = 0
	if r.cfg.Markers {
		if err := r.m.leading(r); err != nil {
			return 0, err
		}
	}
	n := int(binary.BigEndian.Uint16(r.buf[r.rp:]))
	if n > r.cfg.MaxULPDU {
		// Without markers the stream cannot be re-synchronised, so this
		// ends it. siw reports a bad length field as LLP/MPA/0x03 (a
		// length underflow, siw_get_hdr); the same code is used here.
		return 0, r.fail(protoErr(termcode.MPAMarker, ErrULPDULength, "ULPDU_Length %d, limit %d", n, r.cfg.MaxULPDU))
	}
	if r.cfg.VerifyFirst {
		if err := r.verify(n); err != nil {
			return 0, err
		}
	}
	if err := r.consume(lengthLen); err != nil {
		return 0, err
	}
	r.inFPDU, r.ulpdu, r.remain = true, n, n
	return n, nil
}

// verify reads the rest of the FPDU whose ULPDU_Length n has arrived and
// checks its CRC (VerifyFirst). Once the length field is in, the FPDU has
// begun: a stream that ends or a deadline that falls before the rest
// arrives breaks the stream, as inside any FPDU.
func (r *Reader) verify(n int) error {
	total := FPDULen(n)
	if err := r.fill(total, false); err != nil {
		return err
	}
	fpdu := r.buf[r.rp : r.rp+total]
	var computed uint32
	if r.cfg.Markers {
		computed = r.m.crcWith(r.crc, fpdu[:total-crcLen])
	} else {
		computed = crc32.Checksum(fpdu[:total-crcLen], castagnoli)
	}
	if got := binary.LittleEndian.Uint32(fpdu[total-crcLen:]); got != computed {
		return r.fail(crcError(n, got, computed))
	}
	r.verified = true
	return nil
}

// Idle reports whether the Reader stands between FPDUs with nothing
// buffered: the next call waits for the peer.
func (r *Reader) Idle() bool { return !r.inFPDU && r.rp == r.wp }

// AwaitFPDU waits, between FPDUs, until the next FPDU is entirely in the
// buffer, so that reading it does not wait for the peer, and reports true.
// It reports false, having waited for no more than the length field, when
// that FPDU is longer than limit bytes on the wire or than the buffer, and
// at once when markers are on: the caller then reads the FPDU the usual
// way, its payload straight into place. A read deadline that ends the wait returns
// os.ErrDeadlineExceeded (wrapped) and changes nothing — what arrived stays
// buffered and the next call goes on from there — so a caller may
// interrupt a Reader waiting between FPDUs, which a deadline in the middle
// of an FPDU (the stream is then broken) does not allow.
func (r *Reader) AwaitFPDU(limit int) (bool, error) {
	if r.broken != nil {
		return false, r.broken
	}
	if r.inFPDU {
		return false, fmt.Errorf("%w: AwaitFPDU inside an FPDU", ErrState)
	}
	if r.cfg.Markers {
		return false, nil
	}
	if err := r.fill(lengthLen, true); err != nil {
		return false, err
	}
	n := FPDULen(int(binary.BigEndian.Uint16(r.buf[r.rp:])))
	if n > limit || n > len(r.buf) {
		return false, nil
	}
	if err := r.fill(n, true); err != nil {
		return false, err
	}
	return true, nil
}

// Whole reports whether the next FPDU is entirely in the buffer: whether
// AwaitFPDU would report true without reading.
func (r *Reader) Whole() bool {
	if r.inFPDU || r.cfg.Markers || r.wp-r.rp < lengthLen {
		return false
	}
	return r.wp-r.rp >= FPDULen(int(binary.BigEndian.Uint16(r.buf[r.rp:])))
}

// Remaining returns the ULPDU bytes of the current FPDU not yet consumed.
func (r *Reader) Remaining() int { return r.remain }

// Peek returns the next n ULPDU bytes without consuming them. The slice
// aliases the internal buffer and is valid until the next call on r.
// n may not exceed Remaining or MaxPeek.
func (r *Reader) Peek(n int) ([]byte, error) {
	if !r.inFPDU {
		return nil, fmt.Errorf("%w: Peek outside an FPDU", ErrState)
	}
	if n < 0 || n > r.remain || n > MaxPeek {
		return nil, fmt.Errorf("%w: Peek(%d) with %d ULPDU bytes left (limit %d)", ErrState, n, r.remain, MaxPeek)
	}
	if err := r.fill(n, false); err != nil {
		return nil, err
	}
	return r.buf[r.rp : r.rp+n], nil
}

// Read reads ULPDU bytes of the current FPDU into p; at the end of the
// ULPDU it returns io.EOF. A large read that finds the buffer empty goes
// directly from the underlying reader into p.
func (r *Reader) Read(p []byte) (int, error) {
	if !r.inFPDU {
		return 0, fmt.Errorf("%w: Read outside an FPDU", ErrState)
	}
	if r.broken != nil {
		return 0, r.broken
	}
	if r.remain == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p = p[:min(len(p), r.remain)]
	if r.wp == r.rp && len(p) >= directRead && !r.cfg.Markers && r.ioErr == nil {
		n, err := r.readDirect(p)
		if n > 0 {
			if r.cfg.CRC && !r.verified {
				r.crc = crc32.Update(r.crc, castagnoli, p[:n])
			}
			r.remain -= n
		}
		if err != nil {
			r.ioErr = err
			if n == 0 {
				return 0, r.torn()
			}
		}
		return n, nil
	}
	if err := r.fill(1, false); err != nil {
		return 0, err
	}
	n := dmaCopy(p, r.buf[r.rp:r.wp])
	if err := r.consume(n); err != nil {
		return 0, err
	}
	r.remain -= n
	return n, nil
}

// ReadFull fills p with the next len(p) ULPDU bytes.
func (r *Reader) ReadFull(p []byte) error {
	if len(p) > r.remain {
		return fmt.Errorf("%w: ReadFull(%d) with %d ULPDU bytes left", ErrState, len(p), r.remain)
	}
	for len(p) > 0 {
		n, err := r.Read(p)
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Discard skips the next n ULPDU bytes (they still count for the CRC).
func (r *Reader) Discard(n int) error {
	if !r.inFPDU {
		return fmt.Errorf("%w: Discard outside an FPDU", ErrState)
	}
	if n < 0 || n > r.remain {
		return fmt.Errorf("%w: Discard(%d) with %d ULPDU bytes left", ErrState, n, r.remain)
	}
	for n > 0 {
		if err := r.fill(1, false); err != nil {
			return err
		}
		k := min(n, r.wp-r.rp)
		if err := r.consume(k); err != nil {
			return err
		}
		r.remain -= k
		n -= k
	}
	return nil
}

// End finishes the FPDU: it skips any unread ULPDU bytes, consumes the pad
// and the CRC field and, when CRC is in use, compares the CRC32c of the
// length field, ULPDU, pad and markers with the field (little-endian).
// A mismatch is an *Error with code 0x02 (ErrCRC), and every later call
// returns it too (RFC 5044 §8) unless ReaderConfig.ContinueAfterCRCError is
// set: the stream stays framed, so the next FPDU can then be read. Either
// way the Reader does not close the stream: for error 2 that is the upper
// layer's duty (§8). Without CRC the field's content is ignored (siw sends
// zero).
func (r *Reader) End() error {
	if !r.inFPDU {
		return fmt.Errorf("%w: End outside an FPDU", ErrState)
	}
	if err := r.Discard(r.remain); err != nil {
		return err
	}
	pad := padLen(r.ulpdu)
	if err := r.fill(pad, false); err != nil {
		return err
	}
	if err := r.consume(pad); err != nil {
		return err
	}
	// Filling first also brings in a marker that may sit between the pad
	// and the CRC field; the CRC covers it.
	if err := r.fill(crcLen, false); err != nil {
		return err
	}
	if r.cfg.Markers {
		if err := r.m.before(r); err != nil {
			return err
		}
	}
	got := binary.LittleEndian.Uint32(r.buf[r.rp:])
	r.rp += crcLen
	if r.cfg.Markers {
		r.m.advance(crcLen)
	}
	r.inFPDU = false
	verified := r.verified
	r.verified = false
	if r.cfg.CRC && !verified && got != r.crc {
		err := crcError(r.ulpdu, got, r.crc)
		if r.cfg.ContinueAfterCRCError {
			return err
		}
		// RFC 5044 §8: no FPDU is delivered after an error.
		return r.fail(err)
	}
	return nil
}

func crcError(ulpdu int, got, computed uint32) error {
	return protoErr(termcode.MPACRC, ErrCRC, "FPDU with ULPDU_Length %d: field 0x%08x, computed 0x%08x", ulpdu, got, computed)
}

// ReadFPDU reads a whole FPDU into dst and returns the ULPDU. If dst is too
// small the FPDU is skipped (its CRC still checked) and the error wraps
// io.ErrShortBuffer.
func (r *Reader) ReadFPDU(dst []byte) ([]byte, error) {
	n, err := r.Next()
	if err != nil {
		return nil, err
	}
	if n > len(dst) {
		if err := r.End(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("mpa: ULPDU of %d bytes, buffer of %d: %w", n, len(dst), io.ErrShortBuffer)
	}
	if err := r.ReadFull(dst[:n]); err != nil {
		return nil, err
	}
	if err := r.End(); err != nil {
		return dst[:n], err
	}
	return dst[:n], nil
}

// Buffered returns the number of stream bytes read ahead and held in the
// buffer (markers excluded).
func (r *Reader) Buffered() int { return r.wp - r.rp }

// consume moves past n buffered bytes, adding them to the CRC; markers
// that sat between them are added in stream order and checked.
func (r *Reader) consume(n int) error {
	if !r.cfg.Markers {
		if r.cfg.CRC && !r.verified {
			r.crc = crc32.Update(r.crc, castagnoli, r.buf[r.rp:r.rp+n])
		}
		r.rp += n
		return nil
	}
	for n > 0 {
		if err := r.m.before(r); err != nil {
			return err
		}
		k := min(n, r.m.untilNext())
		if r.cfg.CRC && !r.verified {
			r.crc = crc32.Update(r.crc, castagnoli, r.buf[r.rp:r.rp+k])
		}
		r.rp += k
		r.m.advance(k)
		n -= k
	}
	return nil
}

// fill makes at least n logical bytes available in the buffer. atStart
// says the reader sits between FPDUs, where a clean end of stream is
// io.EOF rather than a torn FPDU.
func (r *Reader) fill(n int, atStart bool) error {
	if r.broken != nil {
		return r.broken
	}
	for r.wp-r.rp < n {
		if r.ioErr != nil {
			if atStart && r.wp == r.rp && errors.Is(r.ioErr, io.EOF) && !r.m.pending() {
				return io.EOF
			}
			return r.torn()
		}
		if r.pool != nil && r.rp == r.wp {
			// Nothing buffered: wait without a buffer, take one when data
			// arrives (readIdleNow reuses the emptied one first).
			if err := r.awaitIdle(); err != nil {
				if atStart && errors.Is(err, os.ErrDeadlineExceeded) {
					return fmt.Errorf("mpa: waiting for an FPDU: %w", err)
				}
				r.ioErr = err
			}
			continue
		}
		// Fewer than n bytes are buffered. Moving them to the front leaves
		// the most room for the read; it is done when the rest of the
		// buffer cannot take the n bytes or is short, so that a whole
		// FPDU read ahead (VerifyFirst, AwaitFPDU) is not copied twice.
		if r.rp > 0 && (r.rp == r.wp || len(r.buf)-r.rp < n || len(r.buf)-r.wp < directRead) {
			r.wp = copy(r.buf, r.buf[r.rp:r.wp])
			r.rp = 0
		}
		got, err := r.r.Read(r.buf[r.wp:])
		if got == 0 && err == nil {
			// io.Reader allows this now and then; a reader that keeps
			// doing it would spin here forever.
			if r.empty++; r.empty >= 100 {
				err = io.ErrNoProgress
			}
		} else {
			r.empty = 0
		}
		if got > 0 && r.cfg.Markers {
			got = r.m.strip(r.buf[r.wp : r.wp+got])
		}
		r.wp += got
		if err != nil {
			if atStart && errors.Is(err, os.ErrDeadlineExceeded) {
				// Before an FPDU is begun a deadline loses nothing: what
				// arrived stays buffered and the next call goes on.
				return fmt.Errorf("mpa: waiting for an FPDU: %w", err)
			}
			r.ioErr = err
		}
	}
	return nil
}

// torn turns the pending I/O error into the caller's error: a stream that
// ends inside an FPDU is LLP error 0x01 (the TCP connection was lost);
// other errors (deadlines, resets) are passed on wrapped.
func (r *Reader) torn() error {
	if errors.Is(r.ioErr, io.EOF) {
		return r.fail(protoErr(termcode.MPAConnectionLost, ErrConnectionLost, "stream ended inside an FPDU"))
	}
	return fmt.Errorf("mpa: reading FPDU: %w", r.ioErr)
}

func (r *Reader) fail(err error) error {
	r.broken = err
	return err
}
