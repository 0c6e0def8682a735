package mpa

import (
	"fmt"
	"strings"
)

// String is a one-line account of what setup settled, e.g. "MPA rev 2
// enhanced, CRC32c on, no markers, peer-to-peer with Write RTR, IRD 16 /
// ORD 16 (peer IRD 16 / ORD 16)".
func (r *Result) String() string {
	if r == nil {
		return "not connected"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "MPA rev %d", r.Revision)
	switch {
	case r.IRDORDKnown:
		b.WriteString(" enhanced")
	case r.Revision == 2:
		b.WriteString(" (no Enhanced flag)")
	}
	if r.CRC {
		b.WriteString(", CRC32c on")
	} else {
		b.WriteString(", CRC off")
	}
	if r.SendMarkers || r.RecvMarkers {
		fmt.Fprintf(&b, ", markers sent %t received %t", r.SendMarkers, r.RecvMarkers)
	} else {
		b.WriteString(", no markers")
	}
	if r.P2P {
		fmt.Fprintf(&b, ", peer-to-peer with %s RTR", r.RTR)
	} else {
		b.WriteString(", no peer-to-peer")
	}
	if r.IRDORDKnown {
		fmt.Fprintf(&b, ", IRD %d / ORD %d (peer IRD %d / ORD %d)", r.IRD, r.ORD, r.PeerIRD, r.PeerORD)
	} else {
		b.WriteString(", no IRD/ORD exchange")
	}
	return b.String()
}
