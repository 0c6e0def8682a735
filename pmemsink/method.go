package pmemsink

import (
	"errors"
	"fmt"
	"strings"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rpma"
)

// Method is a way an initiator asks a target to make its RDMA Writes
// durable.
type Method uint8

// Methods, best first.
const (
	// MethodAuto (an option only): the best the peer supports.
	MethodAuto Method = iota
	// MethodExtension: a Flush Request of iwarp-go's Flush extension
	// (docs/rfc-notes/flush-extension.md), negotiated in the MPA private
	// data; its response says whether the range is persistent.
	MethodExtension
	// MethodGPSPM: a GPSPM flush request in a Send, answered by a Send
	// after the target persisted the range (librpma's example 09).
	MethodGPSPM
	// MethodReadAfterWrite: an 8-byte RDMA Read at the flushed offset,
	// answered after everything the connection wrote before it was placed
	// and, at a target that implements read-after-write (iwarp-go's sink),
	// persisted: what librpma 1.2's rpma_flush sends.
	MethodReadAfterWrite
)

var methodNames = [...]string{"auto", "flush-extension", "gpspm", "read-after-write"}

func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return fmt.Sprintf("Method(%d)", uint8(m))
}

// ParseMethod parses a method's name, or "extension", "flush" or "read".
func ParseMethod(s string) (Method, error) {
	switch strings.ToLower(s) {
	case "extension", "flush":
		return MethodExtension, nil
	case "read":
		return MethodReadAfterWrite, nil
	}
	for i, n := range methodNames {
		if strings.EqualFold(s, n) {
			return Method(i), nil
		}
	}
	return 0, fmt.Errorf("pmemsink: unknown flush method %q (want auto, extension, gpspm or read)", s)
}

// Guarantee is what a completed flush promises about the bytes it covers.
type Guarantee uint8

// Guarantees.
const (
	// Placed: the bytes are in the target's memory, visible to it and to
	// every other connection; nothing is said about surviving power loss.
	Placed Guarantee = iota + 1
	// Persistent: the target declared the bytes durable: its Flush
	// Response said so, or its descriptor declares that the method's
	// flushes are persistent (see Remote.Declares).
	Persistent
)

func (g Guarantee) String() string {
	switch g {
	case Placed:
		return "placed"
	case Persistent:
		return "persistent"
	}
	return fmt.Sprintf("Guarantee(%d)", uint8(g))
}

// ErrNotOffered is the error of an operation the target's descriptor does
// not offer (Remote.Writable, Remote.Readable): it is refused before
// anything is sent, where the target would end the connection with a
// Terminate (librpma's rpma_flush refuses such a flush the same way, with
// RPMA_E_NOSUPP).
var ErrNotOffered = errors.New("pmemsink: the target's descriptor does not offer this operation")

// ErrNotPersistent is the error of a flush that asked for persistence
// (RequirePersistent) and did not get the target's word for it. The flush
// itself completed: the bytes are Placed.
var ErrNotPersistent = errors.New("pmemsink: the target did not declare the flushed bytes persistent")

// Remote is a target's region as an initiator addresses it: what the
// librpma descriptor blob in the target's MPA Reply says (rpma.CommonData).
type Remote struct {
	STag conn.STag
	// Base is the tagged offset of the region's first byte; region offset
	// N is tagged offset Base + N.
	Base uint64
	Size uint64
	// Usage and DirectWriteToPmem are the descriptor's declarations.
	Usage             rpma.Usage
	DirectWriteToPmem bool
	// DataOffset is where librpma's example clients put their data.
	DataOffset uint16
	// HasPeerCfg says whether the descriptor carried a peer configuration
	// (example 05's server sends one; 04, 07 and 09 do not, and then
	// DirectWriteToPmem is false).
	HasPeerCfg bool
}

// ParseRemote decodes a target's private data (the librpma 28-byte
// struct common_data; more bytes are ignored).
func ParseRemote(privateData []byte) (Remote, error) {
	cd, err := rpma.ParseCommonData(privateData)
	if err != nil {
		return Remote{}, err
	}
	return Remote{STag: conn.STag(cd.MR.RKey), Base: cd.MR.Addr, Size: cd.MR.Length, Usage: cd.MR.Usage,
		DirectWriteToPmem: cd.HasPeerCfg && cd.PeerCfg.DirectWriteToPmem, DataOffset: cd.DataOffset,
		HasPeerCfg: cd.HasPeerCfg}, nil
}

// Addr returns the address of region offset off.
func (r Remote) Addr(off uint64) conn.RemoteAddr {
	return conn.RemoteAddr{STag: r.STag, TO: r.Base + off}
}

// Declares reports whether the descriptor declares that a completed flush
// by m makes the bytes persistent:
//
//   - read-after-write: direct_write_to_pmem = 1 and the persistent flush
//     type (librpma's condition for RPMA_FLUSH_TYPE_PERSISTENT);
//   - GPSPM: the persistent flush type (librpma's example 09 server sets it
//     exactly when its memory is persistent, and persists before it
//     answers);
//   - the Flush extension: never from the descriptor; each Flush Response
//     says so.
func (r Remote) Declares(m Method) bool {
	persistent := r.Usage&rpma.UsageFlushTypePersistent != 0
	switch m {
	case MethodReadAfterWrite:
		return persistent && r.DirectWriteToPmem
	case MethodGPSPM:
		return persistent
	}
	return false
}

// Writable reports whether the descriptor lets a peer write the region:
// librpma registers RDMA Write access for RPMA_MR_USAGE_WRITE_DST only
// (src/peer.c, rpma_peer_usage2access). All of librpma 1.2's example
// servers declare it.
func (r Remote) Writable() bool { return r.Usage&rpma.UsageWriteDst != 0 }

// Readable reports whether the descriptor lets a peer read the region, and
// so flush it by read-after-write: librpma registers RDMA Read access for
// READ_SRC and for either FLUSH_TYPE bit (rpma_peer_usage2access), which
// is why example 05's and 09's servers, which declare no READ_SRC, still
// answer rpma_flush's 8-byte Read.
func (r Remote) Readable() bool {
	return r.Usage&(rpma.UsageReadSrc|rpma.UsageFlushTypeVisibility|rpma.UsageFlushTypePersistent) != 0
}

// gpspmShaped reports whether the descriptor is what librpma 1.2's example
// 09 server sends (examples/09-flush-to-persistent-GPSPM/server.c): WRITE_DST
// and one flush type, no READ_SRC, no peer configuration. Example 05's
// server differs only by its peer configuration. The shape proves nothing
// (a descriptor cannot say that a target answers GPSPM), so it only makes
// an error say what to try.
func (r Remote) gpspmShaped() bool {
	return r.Writable() && r.Usage&rpma.UsageReadSrc == 0 && !r.HasPeerCfg &&
		r.Usage&(rpma.UsageFlushTypeVisibility|rpma.UsageFlushTypePersistent) != 0
}

func (r Remote) check(off, n uint64) error {
	if n > r.Size || off > r.Size-n {
		return fmt.Errorf("%w: [%d, +%d) of the peer's %d-byte region", ErrRange, off, n, r.Size)
	}
	return nil
}

// FlushResult says how a flush was done and what it promises.
type FlushResult struct {
	Method    Method
	Guarantee Guarantee
}

func (r FlushResult) String() string { return r.Method.String() + ", " + r.Guarantee.String() }
