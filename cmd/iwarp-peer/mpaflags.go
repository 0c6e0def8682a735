package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/iwarp-go/iwarp-go/conn"
)

// mpaFlags are the connection-setup flags of the commands that
// interoperate with other iWARP stacks. A flag not given adds no option:
// the command's package applies its own defaults.
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

var crcModes = map[string]conn.CRCMode{"off": conn.CRCOff, "preferred": conn.CRCPreferred, "required": conn.CRCRequired}

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

// options validates the flags given and turns them into connection
// options. The revision and Enhanced options switch peer-to-peer off, so
// the RTR choice comes last.
func (m *mpaFlags) options() ([]conn.Option, error) {
	var opts []conn.Option
	if m.crc != "" {
		mode, ok := crcModes[m.crc]
		if !ok {
			return nil, fmt.Errorf("--crc %q: want off, preferred or required", m.crc)
		}
		opts = append(opts, conn.WithCRC(mode))
	}
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
	if m.p2p == "" {
		return opts, nil
	}
	rtr, err := parseRTR(m.p2p)
	if err != nil {
		return nil, err
	}
	if rtr == 0 {
		return append(opts, conn.WithoutP2P()), nil
	}
	if m.rev == 1 || m.noEnhanced {
		return nil, fmt.Errorf("--p2p %s needs MPA revision 2 with the Enhanced flag", m.p2p)
	}
	return append(opts, conn.WithP2P(rtr)), nil
}
