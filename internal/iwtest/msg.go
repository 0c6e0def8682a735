package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The iwtest control protocol (interop/siw/cprog/PROTOCOL.md, version 1):
// 32-byte control messages, big-endian, exchanged as RDMAP Sends.
const (
	iwtCtrlLen   = 32
	iwtMagic     = 0x49575431 // "IWT1"
	iwtMaxSize   = 16 << 20   // largest message of a session (§4)
	iwtMaxPData  = 251        // siw's 8-bit PD length wraps above this (§1)
	iwtInvRegion = 4096       // the region a Send with Invalidate names (§5)
	iwtPort      = 7175
)

// iwtMsgType is the type byte of a control message (PROTOCOL.md §2).
type iwtMsgType uint8

const (
	iwtHello iwtMsgType = 1 + iota
	iwtBegin
	iwtBuf
	iwtGo
	iwtDone
	iwtAck
	iwtBye
)

var iwtMsgNames = [...]string{"?", "HELLO", "BEGIN", "BUF", "GO", "DONE", "ACK", "BYE"}

func (t iwtMsgType) String() string {
	if int(t) < len(iwtMsgNames) {
		return iwtMsgNames[t]
	}
	return fmt.Sprintf("type %d", uint8(t))
}

// iwtTest is the test byte (PROTOCOL.md §2): which operation a phase moves
// its data with.
type iwtTest uint8

const (
	iwtWrite iwtTest = 1 + iota
	iwtRead
	iwtSend
	iwtSendSE
	iwtSendInv
	iwtSendSGE
	iwtWriteSGE
	iwtNumTests
)

var iwtTestNames = [...]string{"", "write", "read", "send", "send_se", "send_inv", "send_sge", "write_sge"}

func (t iwtTest) String() string {
	if t >= 1 && t < iwtNumTests {
		return iwtTestNames[t]
	}
	return fmt.Sprintf("test %d", uint8(t))
}

func (t iwtTest) isWrite() bool { return t == iwtWrite || t == iwtWriteSGE }

func (t iwtTest) isSend() bool {
	return t == iwtSend || t == iwtSendSE || t == iwtSendSGE || t == iwtSendInv
}

// parseIwtTest maps a test name of iwtest's -T list to its number.
func parseIwtTest(name string) (iwtTest, bool) {
	for t := iwtWrite; t < iwtNumTests; t++ {
		if iwtTestNames[t] == name {
			return t, true
		}
	}
	return 0, false
}

// iwtStatus is a result code (PROTOCOL.md §6). The codes from timeout on
// are local: they are printed, never sent.
type iwtStatus uint8

const (
	iwtOK iwtStatus = iota
	iwtMismatch
	iwtOpError
	iwtProtocol
	iwtLength
	iwtInvalidate
	iwtSolicited
	iwtTimeout
	iwtTerminated
	iwtNotTerminated
	iwtNumStatus
)

var iwtStatusNames = [...]string{"ok", "mismatch", "op_error", "protocol", "length", "invalidate", "solicited",
	"timeout", "terminated", "not_terminated"}

func (s iwtStatus) String() string {
	if s < iwtNumStatus {
		return iwtStatusNames[s]
	}
	return "unknown"
}

// iwtCtrl is a view of one control message.
type iwtCtrl []byte

// errIwtNotCtrl: a message arrived where a control message was due but it is
// not one (wrong length or magic); PROTOCOL.md §2 makes that a protocol
// error.
var errIwtNotCtrl = errors.New("not an iwtest control message")

// parseIwtCtrl returns the view of b, which must be exactly one control
// message.
func parseIwtCtrl(b []byte) (iwtCtrl, error) {
	if len(b) != iwtCtrlLen || binary.BigEndian.Uint32(b) != iwtMagic {
		return nil, errIwtNotCtrl
	}
	return iwtCtrl(b), nil
}

func (c iwtCtrl) Type() iwtMsgType { return iwtMsgType(c[4]) }
func (c iwtCtrl) Test() iwtTest    { return iwtTest(c[5]) }
func (c iwtCtrl) Dir() uint8       { return c[6] }
func (c iwtCtrl) Status() uint8    { return c[7] }
func (c iwtCtrl) Iter() uint32     { return binary.BigEndian.Uint32(c[8:]) }
func (c iwtCtrl) Size() uint32     { return binary.BigEndian.Uint32(c[12:]) }
func (c iwtCtrl) Addr() uint64     { return binary.BigEndian.Uint64(c[16:]) }
func (c iwtCtrl) STag() uint32     { return binary.BigEndian.Uint32(c[24:]) }
func (c iwtCtrl) Len() uint32      { return binary.BigEndian.Uint32(c[28:]) }

// Fields copies the message out of the view (the receive buffer it
// aliases is reused for the next message).
func (c iwtCtrl) Fields() iwtMsg {
	return iwtMsg{Type: c.Type(), Test: c.Test(), Dir: c.Dir(), Status: c.Status(), Iter: c.Iter(),
		Size: c.Size(), Addr: c.Addr(), STag: c.STag(), Len: c.Len()}
}

// iwtMsg holds the values of a control message.
type iwtMsg struct {
	Type   iwtMsgType
	Test   iwtTest
	Dir    uint8
	Status uint8
	Iter   uint32
	Size   uint32
	// A buffer descriptor: the tagged offset of the first byte, its STag
	// and how many bytes the peer may access.
	Addr uint64
	STag uint32
	Len  uint32
}

// appendIwtCtrl appends m as a 32-byte control message.
func appendIwtCtrl(b []byte, m *iwtMsg) []byte {
	b = binary.BigEndian.AppendUint32(b, iwtMagic)
	b = append(b, byte(m.Type), byte(m.Test), m.Dir, m.Status)
	b = binary.BigEndian.AppendUint32(b, m.Iter)
	b = binary.BigEndian.AppendUint32(b, m.Size)
	b = binary.BigEndian.AppendUint64(b, m.Addr)
	b = binary.BigEndian.AppendUint32(b, m.STag)
	return binary.BigEndian.AppendUint32(b, m.Len)
}

// iwtPhase names one phase of a session: the values every control message
// inside it echoes.
type iwtPhase struct {
	test iwtTest
	dir  uint8 // 0: the client is the data source (c2s); 1: the server is (s2c)
	iter uint32
	size uint32
}

func (ph iwtPhase) msg(t iwtMsgType, st iwtStatus) iwtMsg {
	return iwtMsg{Type: t, Test: ph.test, Dir: ph.dir, Status: uint8(st), Iter: ph.iter, Size: ph.size}
}

// echoes reports whether m carries the phase's test, dir, iter and size.
func (ph iwtPhase) echoes(m *iwtMsg) bool {
	return m.Test == ph.test && m.Dir == ph.dir && m.Iter == ph.iter && m.Size == ph.size
}

func iwtDirName(dir uint8) string {
	if dir == 0 {
		return "c2s"
	}
	return "s2c"
}
