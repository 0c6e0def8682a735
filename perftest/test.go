package perftest

import (
	"fmt"
	"strings"
)

// Test names one of the six perftest programs this package speaks.
type Test uint8

// The perftest programs, named as in perftest: ib_write_bw is WriteBW.
const (
	WriteBW Test = iota + 1
	ReadBW
	SendBW
	WriteLat
	ReadLat
	SendLat
)

var testNames = [...]string{WriteBW: "write_bw", ReadBW: "read_bw", SendBW: "send_bw",
	WriteLat: "write_lat", ReadLat: "read_lat", SendLat: "send_lat"}

// Tests lists the six tests.
func Tests() []Test { return []Test{WriteBW, ReadBW, SendBW, WriteLat, ReadLat, SendLat} }

func (t Test) valid() bool { return t >= WriteBW && t <= SendLat }

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
	for _, t := range Tests() {
		if testNames[t] == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("perftest: unknown test %q (want one of write_bw, read_bw, send_bw, write_lat, read_lat, send_lat)", s)
}

// Latency reports whether t is one of the _lat tests.
func (t Test) Latency() bool { return t == WriteLat || t == ReadLat || t == SendLat }

// verb is perftest's VerbType: the operation a test measures. Its values
// are perftest's, which prints them as indexes (testsStr).
type verb uint8

const (
	verbSend  verb = 0
	verbWrite verb = 1
	verbRead  verb = 2
)

func (t Test) verb() verb {
	switch t {
	case WriteBW, WriteLat:
		return verbWrite
	case ReadBW, ReadLat:
		return verbRead
	}
	return verbSend
}

// verbName is perftest's testsStr: how the test information names a verb.
func (v verb) name() string {
	return [...]string{"Send", "RDMA_Write", "RDMA_Read"}[v]
}

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
