package capture

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary bytes to the capture reader. It must not panic
// or allocate beyond its limits, and what it returns is bounded by the
// input: reassembled streams never hold more bytes than the file.
func FuzzRead(f *testing.F) {
	var file bytes.Buffer
	w, _ := NewWriter(&file, nil)
	fl, _ := w.Open(FlowConfig{Client: cli4, Server: srv4})
	_ = fl.Segment(Up, []byte("MPA ID Req Frame\x00\x01\x00\x00"))
	_ = fl.Segment(Down, []byte("MPA ID Rep Frame\x00\x01\x00\x00"))
	_ = fl.Close()
	f.Add(file.Bytes())
	f.Add(writeRaw(f, linkSLL, handshake(cli6, srv6, 1, 2)))
	f.Add(writeRawNg(f, linkRaw, handshake(cli4, srv4, 7, 9)))
	if b, err := os.ReadFile(filepath.Join("testdata", "rping-lo.pcap")); err == nil {
		f.Add(b[:min(len(b), 4000)])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		conns, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		total := 0
		for _, c := range conns {
			for _, s := range []*Stream{c.Up, c.Down} {
				total += len(s.Data)
				if len(s.Data) > 0 && s.FrameAt(0) < 1 {
					t.Fatalf("stream byte 0 has no frame")
				}
				if s.FrameAt(len(s.Data)) != 0 || s.FrameAt(-1) != 0 {
					t.Fatalf("FrameAt outside the stream")
				}
			}
		}
		if total > len(data) {
			t.Fatalf("%d stream bytes from a %d-byte file", total, len(data))
		}
	})
}
