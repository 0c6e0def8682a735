// Package stag holds the memory-protection state of one iWARP device:
// Steering Tags, protection domains, registered regions and the checks that
// every tagged DDP segment, RDMA Read Request and local scatter/gather entry
// must pass before data is placed or sourced.
//
// A Table is one STag index space (one "device", like one RNIC). Protection
// domains are created from it, and every region belongs to exactly one PD.
// STags are unique per table; the PD recorded with a region is what tells
// "STag not associated with this stream" apart from "invalid STag", exactly
// as in the verbs model that siw and hardware RNICs follow.
//
// The receive path calls PD.Lookup once per tagged segment. It takes no lock
// and allocates nothing: the index is resolved through an open-addressing
// hash table whose slot array is published atomically (and replaced, not
// changed in place, when it is resized), and the region's STag, state and
// reference count live in one atomic word that is read once.
//
// STags cannot be derived from one another: each registration draws its
// index uniformly from the table's free indices and its key at random, so a
// peer that knows one STag needs about 2^31 guesses for the next one
// registered (docs/rfc-notes/stag.md). A peer can reach every region of the
// PDs its connections belong to, so give each untrusted peer its own PD, as
// RFC 5042 recommends: a guess that names another PD's region fails with
// PDMismatch. Lookup returns the exact
// sub-slice of registered memory the segment addresses, so the caller can read
// the payload from the socket straight into it.
//
// Failures are reported as a Failure kind: what rule failed, not what goes
// on the wire. The one mapping from a failure to the Terminate it causes
// depends on what the peer's message asked of the region (an RDMA Write
// sink, a Read Request source, a Send with Invalidate) and lives with the
// connection engine (package conn, docs/rfc-notes/terminate.md).
//
// A remote access that is about to touch memory (placing a segment's
// payload, sending a Read Response) takes a remote reference with
// LookupRemote and drops it when done. Invalidate and Deregister change the
// region's state at once, so that every later lookup fails, and report the
// accesses still under way through Region.RemoteUses; package conn ends the
// connections behind them and waits for the count to drop before its
// Invalidate or Deregister returns, so that after a successful return no
// peer reads or writes a byte of the memory. Deregister refuses to run while
// local work holds a reference (Region.Acquire), which is how posted work
// requests keep their memory registered until they complete.
//
// A memory window (PD.AllocWindow, window.go) holds an STag index of its
// own; each bind publishes there an immutable binding, a Region of kind
// KindMemoryWindow that narrows a region's range and rights, so lookups
// treat windows and regions alike. A type 2 binding names the stream it
// is tied to, which LookupRemoteFrom compares with the stream the access
// arrived on. A region's state word carries a windows-bound bit: while
// it is set the region can be neither invalidated nor deregistered.
package stag
