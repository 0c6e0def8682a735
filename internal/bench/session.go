package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// A bench run is a series of sessions, one connection each. The client
// describes a session in its MPA Request's private data; the server sizes
// its memory and queues from it and answers with its region in the
// Reply's private data, so no message on the measured connection is spent
// on set-up.

const (
	magic = "iwpb"
	// version 2: the client asks for the server's report at the end of a
	// session (report.go).
	version    = 2
	sessionLen = 40
	replyLen   = 20

	// Bounds the server applies to what a client asks of it.
	MaxSize    = 256 << 20
	MaxWindow  = 1024
	maxCredits = 4096
)

// Phase is what a session measures.
type Phase byte

const (
	PhaseBandwidth Phase = 'b'
	PhaseLatency   Phase = 'l'
)

// Region describes a registered buffer to the peer: the tagged offset of
// its first byte, its STag and its length, 16 bytes big-endian on the wire.
type Region struct {
	TO   uint64
	STag uint32
	Len  uint32
}

func appendRegion(b []byte, r Region) []byte {
	b = binary.BigEndian.AppendUint64(b, r.TO)
	b = binary.BigEndian.AppendUint32(b, r.STag)
	return binary.BigEndian.AppendUint32(b, r.Len)
}

func parseRegion(b []byte) Region {
	return Region{TO: binary.BigEndian.Uint64(b), STag: binary.BigEndian.Uint32(b[8:]), Len: binary.BigEndian.Uint32(b[12:])}
}

// Session is what the client asks the server to do.
type Session struct {
	Phase   Phase
	Op      byte   // 'w', 'r' or 's'
	Final   bool   // the client's last session
	Size    uint32 // message size
	Window  uint32 // work requests the client keeps in flight
	Credits uint32 // receives the server keeps posted for Sends
	Batch   uint32 // received Sends per credit message
	Region  Region // the client's buffer: the target of the server's Writes
}

const sessionFinal = 0x01

// AppendSession appends the 40-byte encoding of s.
func AppendSession(b []byte, s Session) []byte {
	b = append(b, magic...)
	flags := byte(0)
	if s.Final {
		flags |= sessionFinal
	}
	b = append(b, version, byte(s.Phase), s.Op, flags)
	b = binary.BigEndian.AppendUint32(b, s.Size)
	b = binary.BigEndian.AppendUint32(b, s.Window)
	b = binary.BigEndian.AppendUint32(b, s.Credits)
	b = binary.BigEndian.AppendUint32(b, s.Batch)
	return appendRegion(b, s.Region)
}

// ErrNotBench: the private data is not a bench session.
var ErrNotBench = errors.New("not an iwarp-peer bench session")

// ParseSession decodes and bounds a session request: a server allocates
// what it says and writes where it says, so nothing in it may exceed the
// limits above, and a region the server writes into must hold a message
// and end at or below 2^64.
func ParseSession(b []byte) (Session, error) {
	if len(b) != sessionLen || string(b[:4]) != magic {
		return Session{}, ErrNotBench
	}
	if b[4] != version {
		return Session{}, fmt.Errorf("bench session version %d, want %d", b[4], version)
	}
	s := Session{
		Phase:   Phase(b[5]),
		Op:      b[6],
		Final:   b[7]&sessionFinal != 0,
		Size:    binary.BigEndian.Uint32(b[8:12]),
		Window:  binary.BigEndian.Uint32(b[12:16]),
		Credits: binary.BigEndian.Uint32(b[16:20]),
		Batch:   binary.BigEndian.Uint32(b[20:24]),
		Region:  parseRegion(b[24:40]),
	}
	switch {
	case s.Phase != PhaseBandwidth && s.Phase != PhaseLatency:
		return s, fmt.Errorf("bench phase %q", s.Phase)
	case s.Op != 'w' && s.Op != 'r' && s.Op != 's':
		return s, fmt.Errorf("bench op %q", s.Op)
	case s.Size < 1 || s.Size > MaxSize:
		return s, fmt.Errorf("message size %d (1 to %d)", s.Size, MaxSize)
	case s.Window < 1 || s.Window > MaxWindow:
		return s, fmt.Errorf("window %d (1 to %d)", s.Window, MaxWindow)
	case s.Credits > maxCredits || s.Batch > s.Credits:
		return s, fmt.Errorf("credits %d, batch %d", s.Credits, s.Batch)
	case s.Op == 's' && s.Phase == PhaseBandwidth && (s.Credits == 0 || s.Batch == 0):
		return s, fmt.Errorf("a Send stream needs credits")
	case s.writesBack() && s.Region.Len < s.Size:
		return s, fmt.Errorf("the client's region of %d bytes is smaller than a %d-byte message", s.Region.Len, s.Size)
	case s.writesBack() && s.Region.TO > math.MaxUint64-uint64(s.Size)+1:
		return s, fmt.Errorf("the client's region at 0x%x: a %d-byte message there would end past 2^64", s.Region.TO, s.Size)
	}
	return s, nil
}

// writesBack reports whether the server RDMA Writes into the client's
// region: it answers each Write of a latency session with one.
func (s *Session) writesBack() bool { return s.Phase == PhaseLatency && s.Op == 'w' }

// AppendReply appends the server's answer: the region the client writes
// to or reads from.
func AppendReply(b []byte, r Region) []byte {
	return appendRegion(append(b, magic...), r)
}

// ParseReply decodes the server's answer.
func ParseReply(b []byte) (Region, error) {
	if len(b) != replyLen || string(b[:4]) != magic {
		return Region{}, fmt.Errorf("the server's reply is not a bench session reply (%d bytes)", len(b))
	}
	return parseRegion(b[4:]), nil
}

// fill gives a message buffer content: what it holds is not looked at,
// but it is not all zeros, so nothing on the way can make light of it.
func fill(b []byte) {
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
}
