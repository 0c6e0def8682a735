package dissect

// markerMap converts between a direction's stream offsets and the
// marker-free offsets mpa.Reader works in. With markers (RFC 5044 §4.3, as
// package mpa places them) a 4-octet marker sits at every multiple of 512
// of the FPDU stream, so each 512 stream octets carry 508 FPDU octets.
// Without markers both are the same.
type markerMap bool

const (
	markerLen      = 4
	markerInterval = 512
	markerPayload  = markerInterval - markerLen
)

// logicalLen returns the FPDU octets in the first raw stream octets.
func (m markerMap) logicalLen(raw int) int {
	if !m {
		return raw
	}
	return raw - (markerLen*(raw/markerInterval) + min(markerLen, raw%markerInterval))
}

// rawPos returns the stream offset of FPDU octet l.
func (m markerMap) rawPos(l int) int {
	if !m {
		return l
	}
	return l/markerPayload*markerInterval + markerLen + l%markerPayload
}

// rawStart returns the stream offset where an FPDU starting at FPDU octet
// l begins: at the marker in front of it, if one sits there.
func (m markerMap) rawStart(l int) int {
	if m && l%markerPayload == 0 {
		return m.rawPos(l) - markerLen
	}
	return m.rawPos(l)
}

// rawEnd returns the stream offset just past FPDU octet l-1.
func (m markerMap) rawEnd(l int) int {
	if !m || l == 0 {
		return l
	}
	return m.rawPos(l-1) + 1
}

// count returns the number of markers that start in stream octets [a, b).
func (m markerMap) count(a, b int) int {
	if !m || b <= a {
		return 0
	}
	// Markers start at multiples of 512: count those below b, less those
	// below a.
	below := func(x int) int { return (x + markerInterval - 1) / markerInterval }
	return below(b) - below(a)
}
