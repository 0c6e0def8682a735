package dissect

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/iwarp-go/iwarp-go/internal/capture"
)

// Limits on what Decode reads. Every allocation while decoding is bounded
// by MaxCaptureSize or by the capture's actual size, never by a length
// field; the checks and the limit are those of the capture reader
// underneath (internal/capture), the only copy of them in the module.
const (
	// MaxCaptureSize is the largest capture Decode reads (after gzip
	// decompression).
	MaxCaptureSize = capture.MaxFileSize
	// MaxSnaplen was a separate bound on the per-packet buffer.
	//
	// Deprecated: Decode no longer applies it. Every packet is bounded by
	// the capture's own size (at most MaxCaptureSize), and every length
	// field is checked against the bytes present before anything is sized
	// by it.
	MaxSnaplen = 1 << 20
)

// ErrCapture wraps every failure to read a capture file.
var ErrCapture = errors.New("dissect: unreadable capture")

// DecodeFile reads a pcap or pcapng capture (optionally gzip-compressed)
// and dissects every TCP connection in it.
func DecodeFile(path string) (*Dissection, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	defer f.Close()
	return Decode(f)
}

// Decode reads a pcap or pcapng capture (optionally gzip-compressed) and
// dissects every TCP connection in it: each direction is reassembled by
// sequence number and its bytes fed to an mpa.Reader configured from the
// MPA Request and Reply the capture holds. A file that ends inside a record
// (a capture program stopped while writing) is dissected up to that
// record, and Dissection.Cut says where it stops.
func Decode(r io.Reader) (*Dissection, error) {
	conns, err := capture.Read(r)
	var cut *capture.CutError
	if err != nil && !errors.As(err, &cut) {
		return nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	d := &Dissection{Streams: make([]*Stream, 0, len(conns))}
	if cut != nil {
		d.Cut = &Cut{Frame: cut.Frame, Offset: cut.Offset, Have: cut.Have, Want: cut.Want}
	}
	for i, c := range conns {
		d.Streams = append(d.Streams, fromCapture(i, c))
	}
	return d, nil
}
