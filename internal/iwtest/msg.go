package iwtest

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The iwtest control protocol (interop/siw/cprog/PROTOCOL.md, version 1):
// 32-byte control messages, big-endian, exchanged as RDMAP Sends.
const (
	ctrlLen   = 32
	magic     = 0x49575431 // "IWT1"
	MaxSize   = 16 << 20   // largest message of a session (§4)
	MaxPData  = 251        // siw's 8-bit PD length wraps above this (§1)
	invRegion = 4096       // the region a Send with Invalidate names (§5)
)

// msgType is the type byte of a control message (PROTOCOL.md §2).
type msgType uint8

const (
	msgHello msgType = 1 + iota
	msgBegin
	msgBuf
	msgGo
	msgDone
	msgAck
	msgBye
)

var msgNames = [...]string{"?", "HELLO", "BEGIN", "BUF", "GO", "DONE", "ACK", "BYE"}

func (t msgType) String() string {
	if int(t) < len(msgNames) {
		return msgNames[t]
	}
	return fmt.Sprintf("type %d", uint8(t))
}

// Test is the test byte (PROTOCOL.md §2): which operation a phase moves
// its data with.
type Test uint8

const (
	TestWrite Test = 1 + iota
	TestRead
	TestSend
	TestSendSE
	TestSendInv
	TestSendSGE
	TestWriteSGE
	numTests
)

var testNames = [...]string{"", "write", "read", "send", "send_se", "send_inv", "send_sge", "write_sge"}

func (t Test) String() string {
	if t >= 1 && t < numTests {
		return testNames[t]
	}
	return fmt.Sprintf("test %d", uint8(t))
}

func (t Test) isWrite() bool { return t == TestWrite || t == TestWriteSGE }

func (t Test) isSend() bool {
	return t == TestSend || t == TestSendSE || t == TestSendSGE || t == TestSendInv
}

// AllTests are the tests in the order "all" runs them.
func AllTests() []Test {
	t := make([]Test, 0, numTests-1)
	for x := TestWrite; x < numTests; x++ {
		t = append(t, x)
	}
	return t
}

// ParseTest maps a test name of iwtest's -T list to its number.
func ParseTest(name string) (Test, bool) {
	for t := TestWrite; t < numTests; t++ {
		if testNames[t] == name {
			return t, true
		}
	}
	return 0, false
}

// status is a result code (PROTOCOL.md §6). The codes from timeout on
// are local: they are printed, never sent.
type status uint8

const (
	stOK status = iota
	stMismatch
	stOpError
	stProtocol
	stLength
	stInvalidate
	stSolicited
	stTimeout
	stTerminated
	stNotTerminated
	numStatus
)

var statusNames = [...]string{"ok", "mismatch", "op_error", "protocol", "length", "invalidate", "solicited",
	"timeout", "terminated", "not_terminated"}

func (s status) String() string {
	if s < numStatus {
		return statusNames[s]
	}
	return "unknown"
}

// ctrl is a view of one control message.
type ctrl []byte

// errNotCtrl: a message arrived where a control message was due but it is
// not one (wrong length or magic); PROTOCOL.md §2 makes that a protocol
// error.
var errNotCtrl = errors.New("not an iwtest control message")

// parseCtrl returns the view of b, which must be exactly one control
// message.
func parseCtrl(b []byte) (ctrl, error) {
	if len(b) != ctrlLen || binary.BigEndian.Uint32(b) != magic {
		return nil, errNotCtrl
	}
	return ctrl(b), nil
}

func (c ctrl) Type() msgType { return msgType(c[4]) }
func (c ctrl) Test() Test    { return Test(c[5]) }
func (c ctrl) Dir() uint8    { return c[6] }
func (c ctrl) Status() uint8 { return c[7] }
func (c ctrl) Iter() uint32  { return binary.BigEndian.Uint32(c[8:]) }
func (c ctrl) Size() uint32  { return binary.BigEndian.Uint32(c[12:]) }
func (c ctrl) Addr() uint64  { return binary.BigEndian.Uint64(c[16:]) }
func (c ctrl) STag() uint32  { return binary.BigEndian.Uint32(c[24:]) }
func (c ctrl) Len() uint32   { return binary.BigEndian.Uint32(c[28:]) }

// Fields copies the message out of the view (the receive buffer it
// aliases is reused for the next message).
func (c ctrl) Fields() message {
	return message{Type: c.Type(), Test: c.Test(), Dir: c.Dir(), Status: c.Status(), Iter: c.Iter(),
		Size: c.Size(), Addr: c.Addr(), STag: c.STag(), Len: c.Len()}
}

// message holds the values of a control message.
type message struct {
	Type   msgType
	Test   Test
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

// appendCtrl appends m as a 32-byte control message.
func appendCtrl(b []byte, m *message) []byte {
	b = binary.BigEndian.AppendUint32(b, magic)
	b = append(b, byte(m.Type), byte(m.Test), m.Dir, m.Status)
	b = binary.BigEndian.AppendUint32(b, m.Iter)
	b = binary.BigEndian.AppendUint32(b, m.Size)
	b = binary.BigEndian.AppendUint64(b, m.Addr)
	b = binary.BigEndian.AppendUint32(b, m.STag)
	return binary.BigEndian.AppendUint32(b, m.Len)
}

// phase names one phase of a session: the values every control message
// inside it echoes.
type phase struct {
	test Test
	dir  uint8 // 0: the client is the data source (c2s); 1: the server is (s2c)
	iter uint32
	size uint32
}

func (ph phase) msg(t msgType, st status) message {
	return message{Type: t, Test: ph.test, Dir: ph.dir, Status: uint8(st), Iter: ph.iter, Size: ph.size}
}

// echoes reports whether m carries the phase's test, dir, iter and size.
func (ph phase) echoes(m *message) bool {
	return m.Test == ph.test && m.Dir == ph.dir && m.Iter == ph.iter && m.Size == ph.size
}

func dirName(dir uint8) string {
	if dir == 0 {
		return "c2s"
	}
	return "s2c"
}
