package mpa

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// Markers (RFC 5044 §4.2, §4.3), as implemented here:
//
//   - A 4-byte marker sits at every stream position that is a multiple of
//     512, counted per direction from the first octet of the first FPDU
//     (the Request/Reply do not count). So the first FPDU opens with one.
//   - Layout: 16 reserved bits (sent as zero, ignored on receipt), then the
//     16-bit FPDUPTR, whose two low bits are sent as zero and read as zero.
//   - A marker that falls where an FPDU begins precedes its length field,
//     belongs to that FPDU and has FPDUPTR 0. Any other marker holds the
//     number of octets from the first octet of the enclosing FPDU's length
//     field to the marker's own first octet. siw names the field "FPDU
//     header-marker distance". (OSC's software iWARP counted from the
//     leading marker instead, which differs by 4 for FPDUs that begin with
//     a marker; see docs/rfc-notes/rfc5044.md.)
//   - A marker may fall between the pad and the CRC field.
//   - ULPDU_Length and the pad ignore markers; the CRC covers them (as
//     Wireshark, irdma and OSC compute it, and as tshark checks it).
//
// Because FPDUPTR has 16 bits, an FPDU with markers must stay shorter than
// 64 KiB on the wire; MaxULPDUWithMarkers keeps every pointer in range.

// MaxULPDUWithMarkers is the largest ULPDU a Writer frames when markers are
// enabled: the FPDU, markers included, then stays within FPDUPTR's 16 bits.
const MaxULPDUWithMarkers = 64512

// markerRec is a marker removed from the received stream: it sat right
// before logical (marker-free) stream position log.
type markerRec struct {
	log int64
	b   [markerLen]byte
}

// markerState strips markers from received bytes and checks them as the
// bytes around them are consumed.
type markerState struct {
	q    []markerRec // markers removed but not yet consumed, in order
	head int

	rawIn   int64 // raw stream bytes received
	logIn   int64 // logical bytes produced
	partial int   // bytes of a marker split across reads
	pbuf    [markerLen]byte

	logRead int64 // logical position of the next byte to consume
	rawRead int64 // its raw stream position
	lenRaw  int64 // raw position of the current FPDU's length field
}

func (m *markerState) init(bufSize int) {
	// Logical bytes held never exceed the buffer, so neither do the
	// markers between them: one per 508 logical bytes, plus slack.
	m.q = make([]markerRec, 0, bufSize/(markerInterval-markerLen)+4)
}

// strip removes markers from b, freshly read raw bytes, in place and
// returns the number of logical bytes left at its front.
func (m *markerState) strip(b []byte) int {
	dst, src := 0, 0
	for src < len(b) {
		if m.partial > 0 || m.rawIn%markerInterval == 0 {
			k := min(markerLen-m.partial, len(b)-src)
			copy(m.pbuf[m.partial:], b[src:src+k])
			m.partial += k
			src += k
			m.rawIn += int64(k)
			if m.partial == markerLen {
				m.push(markerRec{log: m.logIn, b: m.pbuf})
				m.partial = 0
			}
			continue
		}
		k := min(int(markerInterval-m.rawIn%markerInterval), len(b)-src)
		if dst != src {
			copy(b[dst:], b[src:src+k])
		}
		dst += k
		src += k
		m.rawIn += int64(k)
		m.logIn += int64(k)
	}
	return dst
}

func (m *markerState) push(r markerRec) {
	if len(m.q) == cap(m.q) && m.head > 0 {
		n := copy(m.q, m.q[m.head:])
		m.q = m.q[:n]
		m.head = 0
	}
	m.q = append(m.q, r)
}

// pending reports markers (or parts of one) received but not consumed.
func (m *markerState) pending() bool { return m.partial > 0 || m.head < len(m.q) }

// untilNext returns how many logical bytes may be consumed before the next
// recorded marker.
func (m *markerState) untilNext() int {
	if m.head < len(m.q) {
		return int(m.q[m.head].log - m.logRead)
	}
	return math.MaxInt
}

func (m *markerState) advance(k int) {
	m.logRead += int64(k)
	m.rawRead += int64(k)
}

// leading consumes a marker that opens the FPDU starting now (FPDUPTR must
// be 0) and records where the FPDU's length field is.
func (m *markerState) leading(r *Reader) error {
	if err := m.take(r, true); err != nil {
		return err
	}
	m.lenRaw = m.rawRead
	return nil
}

// before consumes a marker sitting right before the next logical byte.
func (m *markerState) before(r *Reader) error { return m.take(r, false) }

func (m *markerState) take(r *Reader, lead bool) error {
	for m.head < len(m.q) && m.q[m.head].log <= m.logRead {
		rec := &m.q[m.head]
		if rec.log < m.logRead {
			// Consumption never steps over a marker; this would be a bug,
			// reported instead of looping.
			return r.fail(protoErr(termcode.MPALocalCatastrophic, ErrMarker, "marker at %d passed over at %d", rec.log, m.logRead))
		}
		want := int64(0)
		if !lead {
			want = m.rawRead - m.lenRaw
		}
		// RFC 5044 §4.2: "the receivers MUST always treat these [the two
		// low bits of FPDUPTR] as zero for calculations". The reserved
		// half (rec.b[:2]) is ignored; both still count for the CRC.
		got := int64(binary.BigEndian.Uint16(rec.b[2:]) &^ 3)
		if got != want {
			return r.fail(protoErr(termcode.MPAMarker, ErrMarker,
				"marker at stream offset %d has FPDUPTR %d, the FPDU's length field is %d octets back", m.rawRead, got, want))
		}
		if r.cfg.CRC {
			r.crc = crc32.Update(r.crc, castagnoli, rec.b[:])
		}
		m.rawRead += markerLen
		m.head++
		lead = false
	}
	if m.head == len(m.q) {
		m.q, m.head = m.q[:0], 0
	}
	return nil
}
