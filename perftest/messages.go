package perftest

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The small messages of the comm connection. Each is one Send of exactly
// the item's size (ctx_xchg_data_rdma).

// sysDataLen is the size of the cycle-buffer and cache-line messages: a
// big-endian int (hton_int).
const sysDataLen = 4

// Bounds on the peer's system data. perftest sends its page size and cache
// line size and both sides take the larger; this side allocates by them,
// so a peer cannot make it allocate without bound.
const (
	maxCycleBuffer   = 1 << 21 // a huge page
	maxCacheLineSize = 4096
)

func appendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

// parseSysData decodes a cycle-buffer or cache-line message and checks it
// against limit.
func parseSysData(what string, b []byte, limit int) (int, error) {
	if len(b) != sysDataLen {
		return 0, msgLenError(what, len(b), sysDataLen)
	}
	v := int32(binary.BigEndian.Uint32(b))
	if v < 1 || int(v) > limit {
		return 0, fmt.Errorf("%w: %s %d outside 1..%d", ErrMessage, what, v, limit)
	}
	return int(v), nil
}

// mtuLen is the size of the MTU message from perftest 5.31 on: the enum
// ibv_mtu value printed with %d into char[2], so "3\0" for 1024 bytes.
const mtuLen = 2

// MTU values as in enum ibv_mtu.
const (
	mtu256  = 1
	mtu1024 = 3
	mtu4096 = 5
)

// mtuBytes is MTU_SIZE: the bytes of an ibv_mtu value.
func mtuBytes(m int) int { return 1 << (7 + m) }

func appendMTU(b []byte, m int) []byte {
	var s [mtuLen]byte
	copy(s[:], fmt.Sprintf("%d", m))
	return append(b, s[:]...)
}

// parseMTU reads the MTU message as strtol does; 0 when it holds no
// number. perftest ignores values outside 256..4096 bytes.
func parseMTU(b []byte) (int, error) {
	if len(b) != mtuLen {
		return 0, msgLenError("MTU", len(b), mtuLen)
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + int(c-'0')
	}
	return v, nil
}

func validMTU(m int) bool { return m >= mtu256 && m <= mtu4096 }

// BWReport is the result a bandwidth test's sides exchange after the
// measurement (struct bw_report_data): the client's numbers, which a
// write_bw or read_bw server prints as its own. Bandwidths are in the
// sender's report unit (MB/s of 2^20 bytes, or Gb/s with --report_gbits),
// the message rate in millions per second.
type BWReport struct {
	Size    uint64
	Iters   uint64
	BWPeak  float64
	BWAvg   float64
	MsgRate float64
}

// reportItems is the number of messages of a report exchange: size,
// iterations, peak, average and message rate, one 8-byte message each
// (the iterations too: every version from 5.33 on). Each is big-endian:
// hton_long for the integers, the IEEE bits byte-swapped for the doubles.
const (
	reportItems   = 5
	reportItemLen = 8
)

var reportItemNames = [reportItems]string{"report size", "report iterations", "report peak", "report average", "report message rate"}

func (r *BWReport) appendItem(b []byte, i int) []byte {
	var v uint64
	switch i {
	case 0:
		v = r.Size
	case 1:
		v = r.Iters
	case 2:
		v = math.Float64bits(r.BWPeak)
	case 3:
		v = math.Float64bits(r.BWAvg)
	default:
		v = math.Float64bits(r.MsgRate)
	}
	return binary.BigEndian.AppendUint64(b, v)
}

func (r *BWReport) setItem(i int, b []byte) error {
	if len(b) != reportItemLen {
		return msgLenError(reportItemNames[i], len(b), reportItemLen)
	}
	v := binary.BigEndian.Uint64(b)
	switch i {
	case 0:
		r.Size = v
	case 1:
		r.Iters = v
	case 2:
		r.BWPeak = math.Float64frombits(v)
	case 3:
		r.BWAvg = math.Float64frombits(v)
	default:
		r.MsgRate = math.Float64frombits(v)
	}
	return nil
}
