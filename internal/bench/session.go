package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A bench run is a series of sessions, one connection each. The client
// describes a session in its MPA Request's private data; the server sizes
// its memory and queues from it and answers with its region in the
// Reply's private data, so no message on the measured connection is spent
// on set-up.

const (
	benchMagic      = "iwpb"
	benchVersion    = 1
	benchSessionLen = 40
	benchReplyLen   = 20

	// Bounds the server applies to what a client asks of it.
	benchMaxSize    = 256 << 20
	benchMaxWindow  = 1024
	benchMaxCredits = 4096
)

type benchPhase byte

const (
	phaseBandwidth benchPhase = 'b'
	phaseLatency   benchPhase = 'l'
)

// benchSession is what the client asks the server to do.
type benchSession struct {
	phase   benchPhase
	op      byte // 'w', 'r' or 's'
	final   bool // the server's last session: it exits after this one
	size    uint32
	window  uint32 // work requests the client keeps in flight
	credits uint32 // receives the server keeps posted for Sends
	batch   uint32 // received Sends per credit message
	region  rpingInfo
}

const sessionFinal = 0x01

func appendSession(b []byte, s benchSession) []byte {
	b = append(b, benchMagic...)
	flags := byte(0)
	if s.final {
		flags |= sessionFinal
	}
	b = append(b, benchVersion, byte(s.phase), s.op, flags)
	b = binary.BigEndian.AppendUint32(b, s.size)
	b = binary.BigEndian.AppendUint32(b, s.window)
	b = binary.BigEndian.AppendUint32(b, s.credits)
	b = binary.BigEndian.AppendUint32(b, s.batch)
	return appendRpingInfo(b, s.region)
}

var errNotBench = errors.New("not an iwarp-peer bench session")

// parseSession decodes and bounds a session request: a server allocates
// what it says, so nothing in it may exceed the limits above.
func parseSession(b []byte) (benchSession, error) {
	if len(b) != benchSessionLen || string(b[:4]) != benchMagic {
		return benchSession{}, errNotBench
	}
	if b[4] != benchVersion {
		return benchSession{}, fmt.Errorf("bench session version %d, want %d", b[4], benchVersion)
	}
	s := benchSession{
		phase:   benchPhase(b[5]),
		op:      b[6],
		final:   b[7]&sessionFinal != 0,
		size:    binary.BigEndian.Uint32(b[8:12]),
		window:  binary.BigEndian.Uint32(b[12:16]),
		credits: binary.BigEndian.Uint32(b[16:20]),
		batch:   binary.BigEndian.Uint32(b[20:24]),
	}
	s.region, _ = parseRpingInfo(b[24:40])
	switch {
	case s.phase != phaseBandwidth && s.phase != phaseLatency:
		return s, fmt.Errorf("bench phase %q", s.phase)
	case s.op != 'w' && s.op != 'r' && s.op != 's':
		return s, fmt.Errorf("bench op %q", s.op)
	case s.size < 1 || s.size > benchMaxSize:
		return s, fmt.Errorf("message size %d (1 to %d)", s.size, benchMaxSize)
	case s.window < 1 || s.window > benchMaxWindow:
		return s, fmt.Errorf("window %d (1 to %d)", s.window, benchMaxWindow)
	case s.credits > benchMaxCredits || s.batch > s.credits:
		return s, fmt.Errorf("credits %d, batch %d", s.credits, s.batch)
	case s.op == 's' && s.phase == phaseBandwidth && (s.credits == 0 || s.batch == 0):
		return s, fmt.Errorf("a Send stream needs credits")
	}
	return s, nil
}

// The server's answer: the region the client writes to or reads from.
func appendSessionReply(b []byte, region rpingInfo) []byte {
	b = append(b, benchMagic...)
	return appendRpingInfo(b, region)
}

func parseSessionReply(b []byte) (rpingInfo, error) {
	if len(b) != benchReplyLen || string(b[:4]) != benchMagic {
		return rpingInfo{}, fmt.Errorf("the server's reply is not a bench session reply (%d bytes)", len(b))
	}
	return parseRpingInfo(b[4:])
}
