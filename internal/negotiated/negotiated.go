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

// Describe is a one-line account of r: its String.
func Describe(r *mpa.Result) string { return r.String() }

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
