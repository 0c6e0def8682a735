package connflags

import (
	"flag"
	"fmt"
	"strings"

	"github.com/iwarp-go/iwarp-go/conn"
)

// MPA are the connection-setup flags of the commands that interoperate
// with other iWARP stacks. A flag not given adds no option: the command's
// package applies its own defaults.
type MPA struct {
	CRC        string // off | preferred | required
	Rev        int    // 1 | 2
	NoEnhanced bool
	P2P        string // none | write | read | send, or a comma list
}

// Register adds --crc, --mpa-rev, --no-enhanced and --p2p to fs.
func (m *MPA) Register(fs *flag.FlagSet) {
	fs.StringVar(&m.CRC, "crc", "", "MPA CRC: off, preferred or required")
	fs.IntVar(&m.Rev, "mpa-rev", 0, "MPA revision to send: 1 or 2")
	fs.BoolVar(&m.NoEnhanced, "no-enhanced", false, "revision 2 without the RFC 6581 Enhanced flag (no IRD/ORD, no peer-to-peer)")
	fs.StringVar(&m.P2P, "p2p", "", "peer-to-peer RTR types offered (client) or accepted (server): none, write, read, send, or a comma list")
}

var crcModes = map[string]conn.CRCMode{"off": conn.CRCOff, "preferred": conn.CRCPreferred, "required": conn.CRCRequired}

// ParseCRC maps a --crc value to its mode.
func ParseCRC(s string) (conn.CRCMode, error) {
	mode, ok := crcModes[s]
	if !ok {
		return 0, fmt.Errorf("--crc %q: want off, preferred or required", s)
	}
	return mode, nil
}

// ParseRTR maps a --p2p value to a set of RTR types; none is the empty set.
func ParseRTR(s string) (conn.RTR, error) {
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

// Options validates the flags given and turns them into connection
// options. The revision and Enhanced options switch peer-to-peer off, so
// the RTR choice comes last.
func (m *MPA) Options() ([]conn.Option, error) {
	var opts []conn.Option
	if m.CRC != "" {
		mode, err := ParseCRC(m.CRC)
		if err != nil {
			return nil, err
		}
		opts = append(opts, conn.WithCRC(mode))
	}
	switch m.Rev {
	case 0:
	case 1, 2:
		opts = append(opts, conn.WithMPARevision(m.Rev))
	default:
		return nil, fmt.Errorf("--mpa-rev %d: want 1 or 2", m.Rev)
	}
	if m.NoEnhanced {
		if m.Rev == 1 {
			return nil, fmt.Errorf("--no-enhanced applies to MPA revision 2 only")
		}
		opts = append(opts, conn.WithoutEnhanced())
	}
	if m.P2P == "" {
		return opts, nil
	}
	rtr, err := ParseRTR(m.P2P)
	if err != nil {
		return nil, err
	}
	if rtr == 0 {
		return append(opts, conn.WithoutP2P()), nil
	}
	if m.Rev == 1 || m.NoEnhanced {
		return nil, fmt.Errorf("--p2p %s needs MPA revision 2 with the Enhanced flag", m.P2P)
	}
	return append(opts, conn.WithP2P(rtr)), nil
}
