package demo

import (
	"fmt"
	"os"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/pcaptap"
)

// openPcapTap prepares the recording of connections into the pcap file at
// path ("" records nothing). The returned function finishes the file; call
// it after the recorded connections are closed.
func openPcapTap(path string) (conn.Tap, func() error, error) {
	if path == "" {
		return nil, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("recording the capture: %w", err)
	}
	tap, err := pcaptap.New(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("recording the capture: %w", err)
	}
	return tap, func() error {
		err := tap.Close()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}
