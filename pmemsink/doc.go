// Package pmemsink serves files as remote persistent memory: it maps a
// file shared, so that region byte N is file byte N, and makes the bytes a
// connection placed there persistent when a flush asks for it, truthfully.
//
// Open settles once how persistence works for the file (see Mode):
//
//   - device DAX, or a file on a DAX file system mapped with MAP_SYNC:
//     cache-line write-back (CLWB, CLFLUSHOPT or CLFLUSH, chosen by CPUID,
//     then SFENCE; DC CVAP then DSB on arm64) from Go assembly;
//   - page cache: msync(MS_SYNC) of the pages holding a range;
//   - volatile (tmpfs, ramfs): nothing to do and nothing promised.
//
// A requested mode is verified, never assumed, and a sink that cannot
// survive power loss never reports itself durable (Info.Durable).
//
// A connection engine uses a sink through three pieces:
//
//   - a Tracker per connection (Sink.Attach): Placed after each RDMA
//     Write is placed, then PersistAll before answering an RDMA Read
//     (read-after-write), PersistRange for a Flush Request, PersistSpan for
//     a GPSPM flush request; Clean says when a Read needs no persist;
//   - Contain around every access to mapped memory, which turns a fault
//     inside a sink's mapping (the file truncated under it, a media
//     error) into a *FaultError and lets every other fault panic, and
//     AsFault for EFAULT from readv/writev;
//   - Place for the 8-byte atomic store librpma's atomic write relies on.
//
// Over package conn the sink serves itself (docs/persistence.md, "Remote
// persistence"):
//
//   - Sink.Register registers the sink, or a window of it, for one
//     connection's protection domain, with conn hooks that record
//     placements and answer RDMA Reads (read-after-write) and Flush
//     Requests only after a worker goroutine persisted what they cover;
//     Registration.GPSPM does the same for librpma's GPSPM requests;
//   - Server accepts connections, each with its own protection domain,
//     registration, GPSPM receives and librpma's descriptor blob in the
//     MPA Reply (iwarp-peer sink);
//   - Initiator (Dial) writes into a served region, reads it, and flushes
//     by the best method the target supports: the Flush extension, GPSPM
//     or read-after-write, reporting the Method and the Guarantee.
//
// Open pre-faults the mapping of a region of at most WithPrefault's limit
// (default 256 MiB), so that no RDMA Write takes a page fault on the
// receive path; larger regions fault in page by page as they are written
// (docs/persistence.md states the cost).
//
// A failed persist (EIO, ENOSPC) fails the flush and every later one of
// that sink; it is never acknowledged. docs/persistence.md states the
// guarantee of each mode and what this API promises. Package crashsim
// checks the promises by simulated power cuts.
//
// Open returns ErrUnsupported on Windows; DAX is Linux-only.
package pmemsink
