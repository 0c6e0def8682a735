package rdmap

import "strings"

// Extensions is a set of protocol extensions beyond RFC 5040. Its bits are
// those of the flags octet of the iwarp-go private-data trailer, the one
// way two iwarp-go peers negotiate them: a side sets the bits of the
// extensions it accepts, and an extension is in use on a connection when
// both sides set it. A receiver passes the negotiated set to [ParseWith];
// an opcode of an extension not in it is answered like any unknown opcode
// (UnexpectedOpcode, 0/2/0x06), as siw answers it.
type Extensions uint8

// Extensions.
const (
	// ExtFlush: the Flush extension (docs/rfc-notes/flush-extension.md),
	// OpExtension messages. Its bit is PeerFlagFlush.
	ExtFlush Extensions = Extensions(PeerFlagFlush)
	// ExtRFC7306 (rfc7306.go) is the second bit.

	// AllExtensions is every extension this package knows: what a
	// dissector, which sees both sides, accepts.
	AllExtensions = ExtFlush | ExtRFC7306
)

var extNames = [...]string{"flush", "rfc7306"}

func (x Extensions) String() string {
	if x == 0 {
		return "none"
	}
	var parts []string
	for i, n := range extNames {
		if x&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if rest := x &^ (1<<len(extNames) - 1); rest != 0 {
		parts = append(parts, "0x"+hex2pad(uint8(rest)))
	}
	return strings.Join(parts, "|")
}
