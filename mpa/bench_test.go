package mpa

import (
	"fmt"
	"io"
	"net"
	"testing"
)

// Payload sizes for the framing benchmarks. "64KiB" is the largest payload
// that fits one FPDU behind a 14-byte tagged header (65535 - 14).
var benchSizes = []struct {
	name string
	n    int
}{{"64B", 64}, {"4KiB", 4096}, {"64KiB", MaxULPDU - 14}}

// BenchmarkWriter frames FPDUs into a batch and flushes it every 16 FPDUs
// to io.Discard: the cost of framing (header copy, CRC, iovec building),
// without a socket. Without CRC the payload is only referenced, never
// read, so the MB/s figure there is framing overhead, not a throughput.
func BenchmarkWriter(b *testing.B) {
	for _, crc := range []bool{false, true} {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("crc=%v/%s", crc, sz.name), func(b *testing.B) {
				payload := make([]byte, sz.n)
				hdr := tagged(1, 0)
				w := NewWriter(io.Discard, WriterConfig{CRC: crc})
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := w.WriteFPDU(hdr, payload); err != nil {
						b.Fatal(err)
					}
					if i++; i%16 == 0 {
						if err := w.Flush(); err != nil {
							b.Fatal(err)
						}
					}
				}
				_ = w.Flush()
			})
		}
	}
}

// BenchmarkReader takes FPDUs off an in-memory stream the way the DDP
// layer will: Next, Peek the header, read the payload into a destination,
// End (CRC check).
func BenchmarkReader(b *testing.B) {
	for _, mode := range []struct {
		name        string
		crc, verify bool
	}{{"crc=false", false, false}, {"crc=true", true, false}, {"crc=verify-first", true, true}} {
		crc := mode.crc
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", mode.name, sz.name), func(b *testing.B) {
				payload := make([]byte, sz.n)
				for i := range payload {
					payload[i] = byte(i)
				}
				stream := encode(b, WriterConfig{CRC: crc}, []fpduSpec{{hdr: tagged(1, 0), payload: payload}})
				r := NewReader(&loopReader{data: stream}, ReaderConfig{CRC: crc, VerifyFirst: mode.verify})
				dst := make([]byte, sz.n)
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := r.Next(); err != nil {
						b.Fatal(err)
					}
					if _, err := r.Peek(14); err != nil {
						b.Fatal(err)
					}
					if err := r.Discard(14); err != nil {
						b.Fatal(err)
					}
					if err := r.ReadFull(dst); err != nil {
						b.Fatal(err)
					}
					if err := r.End(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkMarkers measures framing and reading with markers and CRC on
// 4 KiB payloads; markers force reads through the buffer.
func BenchmarkMarkers(b *testing.B) {
	payload := make([]byte, 4096)
	hdr := tagged(1, 0)
	b.Run("write", func(b *testing.B) {
		w := NewWriter(io.Discard, WriterConfig{CRC: true, Markers: true})
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := w.WriteFPDU(hdr, payload); err != nil {
				b.Fatal(err)
			}
			if i++; i%16 == 0 {
				_ = w.Flush()
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		// 128 FPDUs of FPDULen(4110) = 4116 octets plus markers: replaying
		// this stream keeps marker positions valid only if its length is a
		// multiple of 512, so pad the batch with small FPDUs until it is.
		specs := make([]fpduSpec, 0, 140)
		for range 128 {
			specs = append(specs, fpduSpec{hdr: hdr, payload: payload})
		}
		var stream []byte
		for {
			stream = encode(b, WriterConfig{CRC: true, Markers: true}, specs)
			if len(stream)%markerInterval == 0 {
				break
			}
			specs = append(specs, fpduSpec{hdr: hdr})
		}
		r := NewReader(&loopReader{data: stream}, ReaderConfig{CRC: true, Markers: true})
		dst := make([]byte, len(payload))
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Next(); err != nil {
				b.Fatal(err)
			}
			if err := r.Discard(14); err != nil {
				b.Fatal(err)
			}
			n := min(r.Remaining(), len(dst))
			if err := r.ReadFull(dst[:n]); err != nil {
				b.Fatal(err)
			}
			if err := r.End(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLoopbackTCP sends FPDUs through a loopback TCP connection: a
// Writer flushing batches of 16 with writev on one side, a Reader placing
// payloads into a destination on the other. MB/s is end-to-end payload
// throughput on this machine (shared, so only ratios are meaningful).
func BenchmarkLoopbackTCP(b *testing.B) {
	for _, mode := range []struct {
		name        string
		crc, verify bool
	}{{"crc=false", false, false}, {"crc=true", true, false}, {"crc=verify-first", true, true}} {
		crc := mode.crc
		for _, sz := range benchSizes[1:] {
			b.Run(fmt.Sprintf("%s/%s", mode.name, sz.name), func(b *testing.B) {
				client, server := tcpPairB(b)
				payload := make([]byte, sz.n)
				hdr := tagged(1, 0)
				const batch = 16
				rounds := b.N/batch + 1
				errc := make(chan error, 1)
				go func() {
					w := NewWriter(client, WriterConfig{CRC: crc})
					for i := 0; i < rounds; i++ {
						for k := 0; k < batch; k++ {
							if err := w.WriteFPDU(hdr, payload); err != nil {
								errc <- err
								return
							}
						}
						if err := w.Flush(); err != nil {
							errc <- err
							return
						}
					}
					errc <- nil
				}()
				r := NewReader(server, ReaderConfig{CRC: crc, VerifyFirst: mode.verify})
				dst := make([]byte, sz.n)
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < rounds*batch; i++ {
					if _, err := r.Next(); err != nil {
						b.Fatal(err)
					}
					if err := r.Discard(14); err != nil {
						b.Fatal(err)
					}
					if err := r.ReadFull(dst); err != nil {
						b.Fatal(err)
					}
					if err := r.End(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func tcpPairB(b *testing.B) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	server := <-done
	b.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}
