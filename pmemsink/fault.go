package pmemsink

import (
	"errors"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The address ranges of every live mapping (and reservation), for deciding
// whether a fault is a sink's. Read only when a fault is being classified.
var mappings struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*Sink]
}

func register(s *Sink) {
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	var l []*Sink
	if p := mappings.list.Load(); p != nil {
		l = slices.Clone(*p)
	}
	l = append(l, s)
	mappings.list.Store(&l)
}

func unregister(s *Sink) {
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	p := mappings.list.Load()
	if p == nil {
		return
	}
	l := slices.DeleteFunc(slices.Clone(*p), func(x *Sink) bool { return x == s })
	mappings.list.Store(&l)
}

// owner returns the sink whose mapping holds addr, if any.
func owner(addr uintptr) *Sink {
	p := mappings.list.Load()
	if p == nil {
		return nil
	}
	for _, s := range *p {
		if s.holds(addr) {
			return s
		}
	}
	return nil
}

func (s *Sink) holds(addr uintptr) bool {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(s.mapped)))
	return addr >= base && addr-base < uintptr(len(s.mapped))
}

func (s *Sink) faultAt(addr uintptr, cause error) *FaultError {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(s.mapped)))
	return &FaultError{Addr: addr, Path: s.info.Path, Off: uint64(addr - base), Err: cause}
}

// Contain runs fn with the goroutine's panic-on-fault setting on (and
// restores it afterwards), and turns a memory fault at an address inside
// any sink's mapping into a *FaultError. Every other panic, including a
// fault anywhere else (a nil pointer dereference), propagates unchanged.
// fn's own error is returned as is.
//
// Wrap every access to sink memory that may fault in it: placement, CRC
// computation and Read Response framing over a mapping, persists.
// Contain does not allocate unless a fault occurs.
func Contain(fn func() error) (err error) {
	return contain(nil, fn)
}

// Guard is Contain for this sink's mapping only: a fault in another
// sink's memory propagates.
func (s *Sink) Guard(fn func() error) error { return contain(s, fn) }

func (s *Sink) guard(fn func() error) error { return contain(s, fn) }

func contain(only *Sink, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		r := recover()
		if r == nil {
			return
		}
		if fe := classify(only, r); fe != nil {
			err = fe
			return
		}
		panic(r)
	}()
	return fn()
}

// classify returns the FaultError for a recovered value that is a memory
// fault inside a sink's mapping (only's, if only is set), else nil. The
// runtime reports faults at non-nil addresses, with panic-on-fault set, as
// a runtime.Error with an Addr method; a nil dereference has no Addr.
func classify(only *Sink, r any) *FaultError {
	e, ok := r.(error)
	if !ok {
		return nil
	}
	af, ok := r.(interface{ Addr() uintptr })
	if !ok {
		return nil
	}
	addr := af.Addr()
	s := owner(addr)
	if s == nil || (only != nil && s != only) {
		return nil
	}
	return s.faultAt(addr, e)
}

// AsFault converts err from a system call that read or wrote mem (readv
// into, writev from a sink's memory) into a *FaultError when it is EFAULT
// and mem lies in a sink's mapping: the kernel's report of the fault a
// user-space access would have taken. Other errors are returned as they
// are.
func AsFault(err error, mem []byte) error {
	if err == nil || len(mem) == 0 || !errors.Is(err, syscall.EFAULT) {
		return err
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	if s := owner(addr); s != nil {
		return s.faultAt(addr, err)
	}
	return err
}
