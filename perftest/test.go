package perftest

import (
	"fmt"
	"strings"
)

// Test names one of the perftest programs this package speaks: the six
// that run against siw, and the two atomic tests, which run between
// iwarp-go peers only (siw implements no RFC 7306 atomics).
type Test uint8

// The perftest programs, named as in perftest: ib_write_bw is WriteBW.
const (
	WriteBW Test = iota + 1
	ReadBW
	SendBW
	WriteLat
	ReadLat
	SendLat
	// AtomicBW and AtomicLat are ib_atomic_bw and ib_atomic_lat: RFC 7306
	// FetchAdd or CmpSwap (Config.Atomic) of 8 bytes, between iwarp-go
	// peers.
	AtomicBW
	AtomicLat
)

var testNames = [...]string{WriteBW: "write_bw", ReadBW: "read_bw", SendBW: "send_bw",
	WriteLat: "write_lat", ReadLat: "read_lat", SendLat: "send_lat", AtomicBW: "atomic_bw", AtomicLat: "atomic_lat"}

// Tests lists the six tests.
func Tests() []Test { return []Test{WriteBW, ReadBW, SendBW, WriteLat, ReadLat, SendLat} }

// AtomicTests lists the two atomic tests (iwarp-go peers only).
func AtomicTests() []Test { return []Test{AtomicBW, AtomicLat} }

func (t Test) valid() bool { return t >= WriteBW && t <= AtomicLat }

// String returns the test's name without the ib_ prefix: "write_bw".
func (t Test) String() string {
	if t.valid() {
		return testNames[t]
	}
	return fmt.Sprintf("Test(%d)", uint8(t))
}

// Program returns the name of the perftest program: "ib_write_bw".
func (t Test) Program() string { return "ib_" + t.String() }

// ParseTest accepts a test's name with or without the ib_ prefix.
func ParseTest(s string) (Test, error) {
	name := strings.TrimPrefix(s, "ib_")
	for _, t := range append(Tests(), AtomicTests()...) {
		if testNames[t] == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("perftest: unknown test %q (want one of write_bw, read_bw, send_bw, write_lat, read_lat, send_lat, atomic_bw, atomic_lat)", s)
}

// Latency reports whether t is one of the _lat tests.
func (t Test) Latency() bool { return t == WriteLat || t == ReadLat || t == SendLat || t == AtomicLat }

// verb is perftest's VerbType: the operation a test measures. Its values
// are perftest's, which prints them as indexes (testsStr).
type verb uint8

const (
	verbSend   verb = 0
	verbWrite  verb = 1
	verbRead   verb = 2
	verbAtomic verb = 3
)

func (t Test) verb() verb {
	switch t {
	case WriteBW, WriteLat:
		return verbWrite
	case ReadBW, ReadLat:
		return verbRead
	case AtomicBW, AtomicLat:
		return verbAtomic
	}
	return verbSend
}

// verbName is perftest's testsStr: how the test information names a verb.
func (v verb) name() string {
	return [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}[v]
}

// oneSidedRead reports whether v reads at the responder with the RDMA Read
// Request's credits (outstanding reads): Reads and atomics.
func (v verb) oneSidedRead() bool { return v == verbRead || v == verbAtomic }

// AtomicType is the operation of the atomic tests (perftest's -A).
type AtomicType uint8

const (
	// FetchAndAdd is perftest's FETCH_AND_ADD, the default.
	FetchAndAdd AtomicType = iota
	// CmpAndSwap is perftest's CMP_AND_SWAP.
	CmpAndSwap
)

func (a AtomicType) String() string {
	if a == CmpAndSwap {
		return "CMP_AND_SWAP"
	}
	return "FETCH_AND_ADD"
}

// ParseAtomicType accepts perftest's -A values.
func ParseAtomicType(s string) (AtomicType, error) {
	switch s {
	case "FETCH_AND_ADD":
		return FetchAndAdd, nil
	case "CMP_AND_SWAP":
		return CmpAndSwap, nil
	}
	return 0, fmt.Errorf("perftest: unknown atomic type %q (want FETCH_AND_ADD or CMP_AND_SWAP)", s)
}

// atomicSize is the message size of the atomic tests.
const atomicSize = 8

// Role is the side of a run. As in perftest, the client is the side given
// the other's address; it opens every connection and speaks first in every
// exchange.
type Role uint8

const (
	Client Role = iota + 1
	Server
)

func (r Role) String() string {
	switch r {
	case Client:
		return "client"
	case Server:
		return "server"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}
