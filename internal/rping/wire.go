package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/iwarp-go/iwarp-go/stag"
)

// rping's wire conventions (rdma-core librdmacm/examples/rping.c).
const (
	rpingPort = 7174
	// rpingInfoLen is sizeof(struct rping_rdma_info): the only message
	// length either side accepts.
	rpingInfoLen = 16
	// rpingMinSize is rping's RPING_MIN_BUFSIZE: room for the longest
	// "rdma-ping-%d: " prefix, sizeof("2147483647") + sizeof("rdma-ping-%d: ").
	rpingMinSize = 11 + 15
	// rpingMaxSize is RPING_BUFSIZE - 1; rping's error message names
	// RPING_BUFSIZE itself (rpingBufSize) as the upper end.
	rpingMaxSize = 65535
	rpingBufSize = 64 * 1024
	rpingSize    = 64 // default -S
	// rpingSQDepth is RPING_SQ_DEPTH; the receive queue holds two.
	rpingSQDepth = 16
	rpingRQDepth = 2
)

// rpingInfo is struct rping_rdma_info: where the sender's buffer is, all
// fields big-endian on the wire.
type rpingInfo struct {
	Addr uint64 // the buffer's virtual address, used by the peer as a TO
	RKey uint32
	Size uint32
}

func appendRpingInfo(b []byte, in rpingInfo) []byte {
	b = binary.BigEndian.AppendUint64(b, in.Addr)
	b = binary.BigEndian.AppendUint32(b, in.RKey)
	return binary.BigEndian.AppendUint32(b, in.Size)
}

// parseRpingInfo decodes a received message. Like rping, it accepts only
// messages of exactly rpingInfoLen bytes.
func parseRpingInfo(b []byte) (rpingInfo, error) {
	if len(b) != rpingInfoLen {
		return rpingInfo{}, fmt.Errorf("Received bogus data, size %d", len(b))
	}
	return rpingInfo{
		Addr: binary.BigEndian.Uint64(b[0:8]),
		RKey: binary.BigEndian.Uint32(b[8:12]),
		Size: binary.BigEndian.Uint32(b[12:16]),
	}, nil
}

// fillPing writes ping number n into buf the way rping's client does:
// "rdma-ping-<n>: " and then printable characters from 'A' to 'z' starting
// at start and wrapping, with a NUL in the last byte. It returns the start
// character of the next ping.
func fillPing(buf []byte, n int, start byte) byte {
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

// stagOf is the STag a peer advertised as its rkey.
func stagOf(rkey uint32) stag.STag { return stag.STag(rkey) }

// cString is buf up to its first NUL, as printf("%s") shows it.
func cString(buf []byte) []byte {
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		return buf[:i]
	}
	return buf
}
