// Package negotiated prints what MPA connection setup settled (a
// *mpa.Result, as conn.QP.Negotiated returns it): one sentence for people,
// and the same facts as key=value fields for report lines that programs
// parse.
package negotiated

import (
	"fmt"
	"strings"

	"github.com/iwarp-go/iwarp-go/mpa"
)

// facts are the settled choices both renderings report.
type facts struct {
	rev      uint8
	enhanced bool // an RFC 6581 IRD/ORD exchange took place
	crc      bool
	p2p      string // the RTR type chosen, lower case, or "none"
}

func factsOf(r *mpa.Result) facts {
	f := facts{rev: r.Revision, enhanced: r.IRDORDKnown, crc: r.CRC, p2p: "none"}
	if r.P2P {
		f.p2p = strings.ToLower(r.RTR.String())
	}
	return f
}

// Describe is a one-line account of r: "MPA rev 2 enhanced, CRC off, no
// markers, no peer-to-peer, IRD 1 / ORD 1 (peer IRD 1 / ORD 1)".
func Describe(r *mpa.Result) string {
	if r == nil {
		return "not connected"
	}
	f := factsOf(r)
	var b strings.Builder
	fmt.Fprintf(&b, "MPA rev %d", f.rev)
	switch {
	case f.enhanced:
		b.WriteString(" enhanced")
	case f.rev == 2:
		b.WriteString(" (no Enhanced flag)")
	}
	if f.crc {
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
	if f.enhanced {
		fmt.Fprintf(&b, ", IRD %d / ORD %d (peer IRD %d / ORD %d)", r.IRD, r.ORD, r.PeerIRD, r.PeerORD)
	} else {
		b.WriteString(", no IRD/ORD exchange")
	}
	return b.String()
}

// Fields are the facts of r as key=value fields, each preceded by a space:
// " mpa_rev=2 enhanced=yes crc=on p2p=write". A nil r gives "".
func Fields(r *mpa.Result) string {
	if r == nil {
		return ""
	}
	f := factsOf(r)
	return fmt.Sprintf(" mpa_rev=%d enhanced=%s crc=%s p2p=%s", f.rev, YesNo(f.enhanced), OnOff(f.crc), f.p2p)
}

// YesNo and OnOff are the spellings of booleans in report lines.
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func OnOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
