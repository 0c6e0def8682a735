package crashsim

import (
	"fmt"
	"sync"
	"syscall"
)

// Shadow is a simulated persistence domain for a region of Size bytes.
// Versions name writes (see Checker.Write); version 0 is the region's
// initial contents, durable from the start. Its methods are safe for
// concurrent use.
type Shadow struct {
	mu         sync.Mutex
	page, line uint64
	src        []byte // the working image, for copying data (nil: versions only)
	workVer    []uint32
	durVer     []uint32
	durData    []byte
	// Lines written back and not yet fenced: their offsets, and their
	// versions and bytes as of the write-back, line after line.
	pending     []uint64
	pendingVer  []uint32
	pendingData []byte
	failNext    error
	msyncs      int
	writeBacks  int
}

// NewShadow returns a shadow of a region of size bytes with the given page
// and cache-line sizes. src, if not nil, is the working image (the sink's
// mapping): persists copy its bytes so that the durable image can be read
// back and compared byte for byte. Pass nil where placement runs
// concurrently with persists (the copy would race with it); versions are
// still tracked.
func NewShadow(size int, page, line uint64, src []byte) *Shadow {
	s := &Shadow{page: page, line: line, workVer: make([]uint32, size), durVer: make([]uint32, size)}
	if src != nil {
		s.src = src[:size]
		s.durData = append([]byte(nil), s.src...)
	}
	return s
}

// Size returns the region's length.
func (s *Shadow) Size() int { return len(s.workVer) }

// placed records that the working image holds version v in [off, off+n).
func (s *Shadow) placed(off, n uint64, v uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := min(off+n, uint64(len(s.workVer)))
	for i := off; i < end; i++ {
		s.workVer[i] = v
	}
}

// FailNext makes the next Msync fail with err (EIO, ENOSPC) without making
// anything durable, as a failed write-back does.
func (s *Shadow) FailNext(err error) {
	s.mu.Lock()
	s.failNext = err
	s.mu.Unlock()
}

// Msync models msync(MS_SYNC) on [start, start+length): EINVAL unless start
// is page-aligned; otherwise every page the range touches becomes durable
// as the working image holds it now.
func (s *Shadow) Msync(start, length uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msyncs++
	if start%s.page != 0 {
		return syscall.EINVAL
	}
	if err := s.failNext; err != nil {
		s.failNext = nil
		return err
	}
	end := (start + length + s.page - 1) / s.page * s.page
	s.commit(start, end)
	return nil
}

func (s *Shadow) commit(start, end uint64) {
	end = min(end, uint64(len(s.workVer)))
	if start >= end {
		return
	}
	copy(s.durVer[start:end], s.workVer[start:end])
	if s.src != nil {
		copy(s.durData[start:end], s.src[start:end])
	}
}

// WriteBack models CLWB of the line holding off: the line's contents now
// are written back, durable at the next Fence.
func (s *Shadow) WriteBack(off uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeBacks++
	a := off / s.line * s.line
	b := min(a+s.line, uint64(len(s.workVer)))
	if a >= b {
		return
	}
	s.pending = append(s.pending, a)
	s.pendingVer = append(s.pendingVer, s.workVer[a:b]...)
	if s.src != nil {
		s.pendingData = append(s.pendingData, s.src[a:b]...)
	}
}

// Fence models SFENCE: every line written back before it is durable.
func (s *Shadow) Fence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var k uint64
	for _, a := range s.pending {
		n := min(s.line, uint64(len(s.workVer))-a) // the last line may be short
		copy(s.durVer[a:a+n], s.pendingVer[k:k+n])
		if s.src != nil {
			copy(s.durData[a:a+n], s.pendingData[k:k+n])
		}
		k += n
	}
	s.pending, s.pendingVer, s.pendingData = s.pending[:0], s.pendingVer[:0], s.pendingData[:0]
}

// Counts returns how many Msync and WriteBack calls the shadow saw.
func (s *Shadow) Counts() (msyncs, writeBacks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msyncs, s.writeBacks
}

// durable returns the durable version of byte off.
func (s *Shadow) durable(off uint64) uint32 { return s.durVer[off] }

func (s *Shadow) String() string {
	return fmt.Sprintf("shadow of %d bytes (page %d, line %d)", len(s.workVer), s.page, s.line)
}
