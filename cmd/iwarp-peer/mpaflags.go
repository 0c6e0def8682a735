package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/mpa"
)

// mpaFlags are the connection-setup flags shared by the subcommands that
// interoperate with other iWARP stacks. The zero value of each field means
// "not given": the subcommand's role decides the default.
type mpaFlags struct {
	crc        string // off | preferred | required
	rev        int    // 1 | 2
	noEnhanced bool
	p2p        string // none | write | read | send, or a comma list
}

func (m *mpaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.crc, "crc", "", "MPA CRC: off, preferred or required")
	fs.IntVar(&m.rev, "mpa-rev", 0, "MPA revision to send: 1 or 2")
	fs.BoolVar(&m.noEnhanced, "no-enhanced", false, "revision 2 without the RFC 6581 Enhanced flag (no IRD/ORD, no peer-to-peer)")
	fs.StringVar(&m.p2p, "p2p", "", "peer-to-peer RTR types offered (client) or accepted (server): none, write, read, send, or a comma list")
}

// parseCRC maps a --crc value to the library's mode.
func parseCRC(s string) (conn.CRCMode, error) {
	switch s {
	case "off":
		return conn.CRCOff, nil
	case "preferred":
		return conn.CRCPreferred, nil
	case "required":
		return conn.CRCRequired, nil
	}
	return 0, fmt.Errorf("--crc %q: want off, preferred or required", s)
}

// parseRTR maps a --p2p value to a set of RTR types; none is the empty set.
func parseRTR(s string) (conn.RTR, error) {
	if s == "none" {
		return 0, nil
	}
	var r conn.RTR
	for _, part := range strings.Split(s, ",") {
		switch strings.TrimSpace(part) {
		case "write":
			r |= conn.RTRWrite
		case "read":
			r |= conn.RTRRead
		case "send":
			r |= conn.RTRSend
		default:
			return 0, fmt.Errorf("--p2p %q: want none, or write, read and send separated by commas", s)
		}
	}
	return r, nil
}

// roleDefaults are what a role uses for the flags that were not given.
type roleDefaults struct {
	crc string
	p2p string
}

// options validates the flags and turns them into library options.
func (m *mpaFlags) options(def roleDefaults) ([]conn.Option, error) {
	crcName := m.crc
	if crcName == "" {
		crcName = def.crc
	}
	crc, err := parseCRC(crcName)
	if err != nil {
		return nil, err
	}
	// rping and iwtest talk to rdma-core programs, which see the MPA
	// private data exactly: send what the user gave, without iwarp-go's
	// peer trailer.
	opts := []conn.Option{conn.WithCRC(crc), conn.WithoutPeerTrailer()}
	switch m.rev {
	case 0:
	case 1, 2:
		opts = append(opts, conn.WithMPARevision(m.rev))
	default:
		return nil, fmt.Errorf("--mpa-rev %d: want 1 or 2", m.rev)
	}
	if m.noEnhanced {
		if m.rev == 1 {
			return nil, fmt.Errorf("--no-enhanced applies to MPA revision 2 only")
		}
		opts = append(opts, conn.WithoutEnhanced())
	}
	p2pName := m.p2p
	if p2pName == "" {
		p2pName = def.p2p
	}
	rtr, err := parseRTR(p2pName)
	if err != nil {
		return nil, err
	}
	if rtr != 0 && (m.rev == 1 || m.noEnhanced) {
		if m.p2p != "" {
			return nil, fmt.Errorf("--p2p %s needs MPA revision 2 with the Enhanced flag", m.p2p)
		}
		rtr = 0 // a role default gives way to an explicit revision
	}
	// The revision and Enhanced options switch peer-to-peer off, so the
	// RTR choice comes last.
	if rtr == 0 {
		opts = append(opts, conn.WithoutP2P())
	} else {
		opts = append(opts, conn.WithP2P(rtr))
	}
	return opts, nil
}

// describeSetup is a one-line account of what connection setup settled.
func describeSetup(r *mpa.Result) string {
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
