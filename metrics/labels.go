package metrics

import (
	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// DefinedOpcodes is the number of RFC 5040 opcodes (0 to
// DefinedOpcodes-1, RFC 5040 §4.1). Exporters report these always, zero or
// not, so that a rate over them starts from the first scrape; the others
// (extension opcodes) only once they occur.
const DefinedOpcodes = int(rdmap.OpTerminate) + 1

// OpcodeLabel returns the label of an RDMAP opcode, rdmap.Opcode.Label:
// "write", "read_request", "read_response", "send", "send_invalidate",
// "send_se", "send_se_invalidate", "terminate", the label of an extension
// opcode ("immediate", "immediate_se", "atomic_request",
// "atomic_response", "extension" for 0xf), or "0xc" to "0xe".
func OpcodeLabel(op rdmap.Opcode) string { return (op & 0x0f).Label() }

// CodeLabel returns a Terminate code as the label exporters give it: four
// hex digits, layer, error type and error code, e.g. "0x1100" for DDP
// Tagged Buffer Error: Invalid STag (the notation of the IANA registry).
func CodeLabel(c termcode.Code) string {
	const digits = "0123456789abcdef"
	return string([]byte{'0', 'x', digits[c>>12&0xf], digits[c>>8&0xf], digits[c>>4&0xf], digits[c&0xf]})
}

// CodeName returns a Terminate code's layer and registry name without the
// triple, e.g. "DDP Tagged Buffer Error: Invalid Steering Tag".
func CodeName(c termcode.Code) string {
	return c.Layer().String() + " " + c.Name()
}

// RefusalReason is one of the ways a listener turns a connection away.
type RefusalReason struct {
	// Label is the reason's label value, e.g. "backlog_full".
	Label string
	// Count reads the reason's counter.
	Count func(*conn.ListenerStats) uint64
}

// RefusalReasons are the reasons a listener turns a connection away, in a
// fixed order: one per counter of conn.ListenerStats besides Accepted.
var RefusalReasons = []RefusalReason{
	{"too_many_handshakes", func(s *conn.ListenerStats) uint64 { return s.HandshakesRefused }},
	{"max_connections", func(s *conn.ListenerStats) uint64 { return s.ConnectionsCapped }},
	{"address_blocked", func(s *conn.ListenerStats) uint64 { return s.AddressBlocked }},
	{"bad_request", func(s *conn.ListenerStats) uint64 { return s.BadRequests }},
	{"backlog_full", func(s *conn.ListenerStats) uint64 { return s.BacklogFull }},
	{"initiator_gone", func(s *conn.ListenerStats) uint64 { return s.Dead }},
	{"expired", func(s *conn.ListenerStats) uint64 { return s.Expired }},
	{"rejected", func(s *conn.ListenerStats) uint64 { return s.Rejected }},
	{"tls_failed", func(s *conn.ListenerStats) uint64 { return s.TLSFailed }},
	{"tls_required", func(s *conn.ListenerStats) uint64 { return s.TLSRequired }},
}
