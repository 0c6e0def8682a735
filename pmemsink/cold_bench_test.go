//go:build linux || darwin || freebsd

package pmemsink

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// coldSinkSize and coldPut are the cold-region benchmark's sink and write:
// a 1 MiB put (an initiator's Write and its flush) into a freshly opened
// 64 MiB sink.
const (
	coldSinkSize = 64 << 20
	coldPut      = 1 << 20
)

// BenchmarkColdRegion puts 1 MiB into a served 64 MiB tmpfs sink and
// flushes it (read-after-write), per op. cold: each put goes to a part of
// the region nothing has touched since Open (the next MiB; a fresh sink
// every 63 puts, opened with the timer stopped, its connection warmed by
// an untimed put into the first MiB), so it meets the
// mapping's first touch unless Open pre-faulted it (cold-no-prefault:
// WithPrefault(0), as before Open pre-faulted). warm: every put goes to
// the same MiB, written once before the timer starts. open-µs is the mean
// time of a cold row's Opens: what pre-faulting moves there; faults/op
// the page faults of the puts.
func BenchmarkColdRegion(b *testing.B) {
	src := make([]byte, coldPut)
	for i := range src {
		src[i] = byte(i)
	}
	opt := UseMethod(MethodReadAfterWrite)
	cold := func(b *testing.B, opts ...Option) {
		dir := memDir(b)
		var opened time.Duration
		var openFaults int64
		opens := 0
		var st *remoteSink
		b.SetBytes(coldPut)
		b.ReportAllocs()
		b.ResetTimer()
		faults := startFaults()
		const slots = coldSinkSize/coldPut - 1 // the first MiB warms the connection
		for i := 0; i < b.N; i++ {
			slot := 1 + i%slots
			if slot == 1 {
				b.StopTimer()
				st.close(b)
				f0, t := processFaults(), time.Now()
				s, err := Open(tpath(dir, "cold"), coldSinkSize, opts...)
				if err != nil {
					b.Fatal(err)
				}
				opened += time.Since(t)
				openFaults += processFaults() - f0
				opens++
				st = serveSink(b, s)
				// A fresh connection's first MiB meets TCP's slow start and
				// small socket buffers; that belongs to no region.
				for range 8 {
					if err := st.in.Write(st.ctx, 0, src); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			off := uint64(slot * coldPut)
			if err := st.in.Write(st.ctx, off, src); err != nil {
				b.Fatal(err)
			}
			if _, err := st.in.Flush(st.ctx, off, coldPut, opt); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		faults.start += openFaults
		faults.report(b)
		st.close(b)
		b.ReportMetric(float64(opened.Microseconds())/float64(opens), "open-µs")
	}
	b.Run("cold", func(b *testing.B) { cold(b) })
	b.Run("cold-no-prefault", func(b *testing.B) { cold(b, WithPrefault(0)) })
	b.Run("warm", func(b *testing.B) {
		s, err := Open(tpath(memDir(b), "warm"), coldSinkSize)
		if err != nil {
			b.Fatal(err)
		}
		st := serveSink(b, s)
		defer st.close(b)
		if err := st.in.Write(st.ctx, 0, src); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(coldPut)
		b.ReportAllocs()
		b.ResetTimer()
		faults := startFaults()
		for i := 0; i < b.N; i++ {
			if err := st.in.Write(st.ctx, 0, src); err != nil {
				b.Fatal(err)
			}
			if _, err := st.in.Flush(st.ctx, 0, coldPut, opt); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		faults.report(b)
	})
}

// remoteSink is a sink served over loopback in this process with an
// initiator connected to it, which close takes down with the sink.
type remoteSink struct {
	s      *Sink
	srv    *Server
	ln     *conn.Listener
	in     *Initiator
	ctx    context.Context
	cancel context.CancelFunc
	done   chan error
}

func serveSink(b *testing.B, s *Sink) *remoteSink {
	srv, err := NewServer(s, ServerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	r := &remoteSink{s: s, srv: srv, ln: ln, ctx: ctx, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Serve(ctx, ln) }()
	if r.in, err = Dial(ctx, "tcp", ln.Addr().String()); err != nil {
		b.Fatal(err)
	}
	return r
}

func (r *remoteSink) close(b *testing.B) {
	if r == nil {
		return
	}
	r.in.Close()
	r.ln.Close()
	if err := r.srv.Shutdown(r.ctx); err != nil {
		b.Error(err)
	}
	<-r.done
	r.cancel()
	if err := r.s.Close(); err != nil {
		b.Error(err)
	}
	if err := os.Remove(r.s.Info().Path); err != nil {
		b.Error(err)
	}
}

// faultCount counts the process's page faults (minor and major, getrusage)
// over a benchmark's loop; the cold rows leave out their Opens' (Linux
// counts the faults of its populate call too).
type faultCount struct{ start int64 }

func processFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Minflt + ru.Majflt)
}

func startFaults() faultCount { return faultCount{processFaults()} }

func (f faultCount) report(b *testing.B) {
	b.ReportMetric(float64(processFaults()-f.start)/float64(b.N), "faults/op")
}
