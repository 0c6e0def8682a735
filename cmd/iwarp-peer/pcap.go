package main

import "github.com/iwarp-go/iwarp-go/conn"

// openPcapTap prepares the recording of a connection into the pcap file at
// path ("" records nothing). The returned function finishes the file.
func openPcapTap(path string) (conn.Tap, func() error, error) {
	if path == "" {
		return nil, func() error { return nil }, nil
	}
	return nil, nil, errNoPcap
}
