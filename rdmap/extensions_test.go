package rdmap

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// An extension's opcode is accepted only by a receiver that negotiated the
// extension; any other answers it as an unknown opcode (RFC 5040 §7.2,
// 0/2/0x06), the Terminate siw sends for opcodes above 7.
func TestParseWith_ExtensionNegotiated_RFC5040_7_2(t *testing.T) {
	req := AppendFlushRequest(nil, 1, FlushRequestFields{ID: 9, STag: 0x1234, TO: 64, Length: 8, Placement: PlaceVisibility})
	_, err := ParseWith(req, len(req), 0)
	c, ok := termcode.Of(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, termcode.RDMAPUnexpectedOpcode, c)

	h, err := ParseWith(req, len(req), ExtFlush)
	require.NoError(t, err)
	require.Equal(t, OpExtension, h.Op)
	require.Equal(t, ExtFlushRequest, h.Ext)
	require.Equal(t, FlushRequestHeaderLen, h.Len)
	require.Zero(t, h.PayloadLen)
	require.Equal(t, uint32(9), h.FlushRequest().ID())
	require.Nil(t, h.FlushResponse())
	require.Equal(t, uint32(1), h.Untagged().MSN())

	resp := AppendFlushResponse(nil, 3, FlushResponseFields{ID: 9, Status: FlushOK, Achieved: PlaceVisibility})
	h, err = ParseWith(resp, len(resp), ExtFlush)
	require.NoError(t, err)
	require.Equal(t, ExtFlushResponse, h.Ext)
	require.Equal(t, uint32(9), h.FlushResponse().ID())
	require.Nil(t, h.FlushRequest())

	// The base opcodes parse the same either way.
	w := AppendWrite(nil, true, 1, 0)
	h1, err1 := ParseWith(w, len(w), 0)
	h2, err2 := ParseWith(w, len(w), ExtFlush)
	require.NoError(t, err1)
	require.NoError(t, err2)
	require.Equal(t, h1, h2)
}

func TestExtensions_String(t *testing.T) {
	require.Equal(t, "none", Extensions(0).String())
	require.Equal(t, "flush", ExtFlush.String())
	require.Equal(t, "flush|0x80", (ExtFlush | 0x80).String())
}

func TestOpcodeLabels(t *testing.T) {
	want := []string{"write", "read_request", "read_response", "send", "send_invalidate", "send_se", "send_se_invalidate", "terminate"}
	for op, l := range want {
		require.Equal(t, l, Opcode(op).Label())
	}
	require.Equal(t, "0xc", Opcode(0xc).Label())
}
