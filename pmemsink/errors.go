package pmemsink

import (
	"errors"
	"fmt"
)

var (
	// ErrUnsupported: the platform cannot map a sink (Windows), or cannot
	// provide the mode asked for (DAX off Linux, or without a cache-line
	// write-back instruction).
	ErrUnsupported = errors.New("pmemsink: not supported on this platform")
	// ErrClosed: the sink is closed or closing.
	ErrClosed = errors.New("pmemsink: sink closed")
	// ErrRange: a range does not lie inside the region.
	ErrRange = errors.New("pmemsink: range outside the region")
	// ErrFault: a memory access inside a sink's mapping faulted (see
	// FaultError).
	ErrFault = errors.New("pmemsink: memory fault in a sink mapping")
)

// PersistError is a failed persist. Once one has occurred, every later
// persist of the same sink fails with it: the kernel reports a write-back
// error to a file once, so a later msync that succeeds does not mean the
// earlier bytes reached storage. It unwraps to the cause (syscall.EIO,
// syscall.ENOSPC, a *FaultError, ...).
type PersistError struct {
	Path string
	// Off and Len are the range whose persist failed first.
	Off, Len uint64
	Err      error
}

func (e *PersistError) Error() string {
	return fmt.Sprintf("pmemsink: persist %s [%d, %d): %v (every later persist of this sink fails)", e.Path, e.Off, e.Off+e.Len, e.Err)
}

// Unwrap returns the cause.
func (e *PersistError) Unwrap() error { return e.Err }

// FaultError is a memory fault inside a sink's mapping: the file was
// truncated under it, storage for a page could not be allocated, a media
// error, or the sink was closed while the access ran. It is also what
// EFAULT from readv/writev into a sink's memory becomes (see AsFault).
type FaultError struct {
	// Addr is the faulting address (0 when the kernel reported EFAULT).
	Addr uintptr
	// Path is the sink's file and Off the fault's region offset.
	Path string
	Off  uint64
	// Err is the runtime error recovered, or syscall.EFAULT.
	Err error
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("pmemsink: memory fault in %s at region offset %d: %v", e.Path, e.Off, e.Err)
}

// Unwrap returns the cause.
func (e *FaultError) Unwrap() error { return e.Err }

// Is matches ErrFault.
func (e *FaultError) Is(target error) bool { return target == ErrFault }
