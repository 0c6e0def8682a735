package dissect_test

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

// Every MPA frame and FPDU of the siw captures decodes to what tshark
// shows, field by field.
func TestSiwCaptures_MatchTshark(t *testing.T) {
	for _, name := range testutil.SiwCaptures {
		t.Run(name, func(t *testing.T) {
			compareWithTshark(t, testutil.CapturePath(t, name+".pcap"))
		})
	}
}
