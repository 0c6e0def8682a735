package rping

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// rping's wire conventions (rdma-core librdmacm/examples/rping.c).
const (
	// Port is rping's default port.
	Port = 7174
	// InfoLen is sizeof(struct rping_rdma_info): the only message length
	// either side accepts.
	InfoLen = 16
	// MinSize is rping's RPING_MIN_BUFSIZE: room for the longest
	// "rdma-ping-%d: " prefix, sizeof("2147483647") + sizeof("rdma-ping-%d: ").
	MinSize = 11 + 15
	// MaxSize is the largest size rping takes: RPING_BUFSIZE - 1. (rping's
	// own message names RPING_BUFSIZE, 65536, as the upper end of the valid
	// range while refusing it.)
	MaxSize = 64*1024 - 1
	// DefaultSize is rping's default -S.
	DefaultSize = 64
	// sqDepth is RPING_SQ_DEPTH; the receive queue holds two.
	sqDepth = 16
	rqDepth = 2
)

// errBogus is rping's word for a message that is not 16 bytes.
//
//lint:ignore ST1005 rping's own message
var errBogus = errors.New("Received bogus data")

// Info is struct rping_rdma_info: where the sender's buffer is, all fields
// big-endian on the wire.
type Info struct {
	Addr uint64 // the buffer's virtual address, used by the peer as a TO
	RKey uint32
	Size uint32
}

// AppendInfo appends the 16-byte encoding of in.
func AppendInfo(b []byte, in Info) []byte {
	b = binary.BigEndian.AppendUint64(b, in.Addr)
	b = binary.BigEndian.AppendUint32(b, in.RKey)
	return binary.BigEndian.AppendUint32(b, in.Size)
}

// ParseInfo decodes a received message. Like rping, it accepts only
// messages of exactly InfoLen bytes.
func ParseInfo(b []byte) (Info, error) {
	if len(b) != InfoLen {
		return Info{}, fmt.Errorf("%w, size %d", errBogus, len(b))
	}
	return Info{
		Addr: binary.BigEndian.Uint64(b[0:8]),
		RKey: binary.BigEndian.Uint32(b[8:12]),
		Size: binary.BigEndian.Uint32(b[12:16]),
	}, nil
}

// FillPing writes ping number n into buf the way rping's client does:
// "rdma-ping-<n>: " and then printable characters from 'A' to 'z' starting
// at start and wrapping, with a NUL in the last byte. It returns the start
// character of the next ping.
func FillPing(buf []byte, n int, start byte) byte {
	prefix := "rdma-ping-" + strconv.Itoa(n) + ": "
	cc := copy(buf, prefix)
	c := start
	for i := cc; i < len(buf); i++ {
		buf[i] = c
		c++
		if c > 'z' {
			c = 'A'
		}
	}
	if len(buf) > 0 {
		buf[len(buf)-1] = 0
	}
	start++
	if start > 'z' {
		start = 'A'
	}
	return start
}

// CString is buf up to its first NUL, as printf("%s") shows it.
func CString(buf []byte) []byte {
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		return buf[:i]
	}
	return buf
}

// A server of this package puts its ping size into the MPA Reply's private
// data, which rdma-core's rping ignores, so that a client of this package
// whose pings are larger can say why the server leaves.
const sizePrefix = "rping -S "

func appendServerSize(b []byte, size int) []byte {
	return strconv.AppendInt(append(b, sizePrefix...), int64(size), 10)
}

// parseServerSize returns the size a server advertised, or false.
func parseServerSize(pd []byte) (int, bool) {
	s, ok := strings.CutPrefix(string(pd), sizePrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}
