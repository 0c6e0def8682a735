package dissect_test

import (
	"path/filepath"
	"testing"
)

// The siw captures are kept once in the repository, in internal/capture's
// test data; these tests read them from there.
var siwCaptures = []string{"mpa-host-client", "mpa-guest-client", "rping-lo", "rping-mtu1500", "ib_send_bw", "ib_write_bw"}

func siwCapture(name string) string {
	return filepath.Join("..", "internal", "capture", "testdata", name+".pcap")
}

// Every MPA frame and FPDU of the siw captures decodes to what tshark
// shows, field by field.
func TestSiwCaptures_MatchTshark(t *testing.T) {
	for _, name := range siwCaptures {
		t.Run(name, func(t *testing.T) {
			compareWithTshark(t, siwCapture(name))
		})
	}
}
