package conn

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The scale benchmarks hold many connected queue pairs in one process, all
// with default QPCaps, and report what an idle one costs and how fast they
// were set up; then a Write on any of them must still be served. They take
// minutes and thousands of file descriptors, so `make test` does not run
// them; `go test -run '^$' -bench Scale -benchtime 1x ./conn` does (b.N is
// ignored: one set-up per run). The metrics:
//
//   - B/QP: heap in use by live objects plus goroutine stacks, after GC
//     (runtime/metrics), grown since before the queue pairs, divided by
//     the queue pairs: one end of a connection. heap-B/QP and stack-B/QP
//     are its two parts; B/QP-after is the same once the Writes below are
//     done and the queue pairs idle again.
//   - kernel-B/QP: the growth of the kernel's TCP buffer memory
//     (/proc/net/sockstat "mem", pages, system-wide) per queue pair, where
//     the system has that file; the socket structures themselves are not
//     in it.
//   - goroutines/QP: goroutines grown since before, per queue pair.
//   - conn/s: connections (two queue pairs each) established per second,
//     scaleDialers connecting at once.
//   - verify-µs: the mean time of an RDMA Write and a Read behind it on
//     each of scaleVerify queue pairs picked at random from both sides.

// BenchmarkScale1000QPs: 500 connections, 1,000 queue pairs; the quick one.
func BenchmarkScale1000QPs(b *testing.B) { benchScale(b, 500, false) }

// BenchmarkScale10000QPs: 5,000 loopback connections, 10,000 queue pairs.
func BenchmarkScale10000QPs(b *testing.B) { benchScale(b, 5000, false) }

// BenchmarkScale1000QPsSRQ and BenchmarkScale10000QPsSRQ: the same, every
// queue pair of both sides bound to one shared receive queue (one PD)
// instead of a receive queue of its own.
func BenchmarkScale1000QPsSRQ(b *testing.B)  { benchScale(b, 500, true) }
func BenchmarkScale10000QPsSRQ(b *testing.B) { benchScale(b, 5000, true) }

const (
	scaleDialers = 32      // connections set up at once
	scaleVerify  = 100     // queue pairs that Write after the idle measurement
	scaleLen     = 4 << 10 // bytes per verifying Write
)

// scaleSide is one side of every connection: its queue pairs share a PD
// and a CQ, and a region the other side's verifying Writes target.
type scaleSide struct {
	pd     *PD
	caps   QPCaps // of every queue pair
	cq     *CQ
	qps    []*QP
	target *MR // RemoteWrite|RemoteRead: the peer's verifying Writes land here
	src    *MR // this side's verifying Writes come from here
	sink   *MR // and are read back into here
}

func newScaleSide(b *testing.B, pairs int, pd *PD) *scaleSide {
	s := &scaleSide{pd: pd, cq: NewCQ(16), qps: make([]*QP, pairs)}
	var err error
	if s.target, err = s.pd.Register(make([]byte, scaleVerify*scaleLen), LocalWrite|RemoteWrite|RemoteRead); err != nil {
		b.Fatal(err)
	}
	if s.src, err = s.pd.Register(make([]byte, scaleVerify*scaleLen), 0); err != nil {
		b.Fatal(err)
	}
	if s.sink, err = s.pd.Register(make([]byte, scaleVerify*scaleLen), LocalWrite); err != nil {
		b.Fatal(err)
	}
	return s
}

func benchScale(b *testing.B, pairs int, shared bool) {
	// A file per queue pair and some to spare; in the siw lab's guest the
	// hard limit is 4096.
	if restore, err := raiseNoFile(uint64(2*pairs + 1024)); err != nil {
		b.Log(err) // the dial's error below says what ran out
	} else {
		defer restore()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	goroutines0 := runtime.NumGoroutine()
	client := newScaleSide(b, pairs, NewPD())
	var server *scaleSide
	if shared {
		srq, err := client.pd.NewSRQ(SRQCaps{})
		if err != nil {
			b.Fatal(err)
		}
		server = newScaleSide(b, pairs, client.pd)
		client.caps.SRQ, server.caps.SRQ = srq, srq
	} else {
		server = newScaleSide(b, pairs, NewPD())
	}
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	acceptErr := make(chan error, 1)
	acceptDone := make(chan struct{})
	defer func() {
		cancel()
		ln.Close()
		<-acceptDone
		scaleClose(client, server)
		// Every goroutine of the queue pairs ends (the package's TestMain
		// checks for leaks after the benchmarks too).
		for deadline := time.Now().Add(time.Minute); runtime.NumGoroutine() > goroutines0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	kernel0, kernelOK := sockstatTCPMem()
	heap0, stacks0 := heapStacks()
	goroutines1 := runtime.NumGoroutine()

	start := time.Now()
	go func() {
		defer close(acceptDone)
		acceptErr <- scaleAccept(ctx, ln, server, pairs)
	}()
	if err := scaleDial(ctx, []string{ln.Addr().String()}, client, pairs); err != nil {
		b.Fatalf("%v (%d queue pairs need as many file descriptors: is RLIMIT_NOFILE high enough?)", err, 2*pairs)
	}
	if err := <-acceptErr; err != nil {
		b.Fatal(err)
	}
	setup := time.Since(start)

	time.Sleep(200 * time.Millisecond) // every goroutine parks
	heap1, stacks1 := heapStacks()
	goroutines := runtime.NumGoroutine()
	kernel1, _ := sockstatTCPMem()
	n := float64(2 * pairs)
	perQP := func(after, before uint64) float64 { return (float64(after) - float64(before)) / n }
	b.ReportMetric(perQP(heap1+stacks1, heap0+stacks0), "B/QP")
	b.ReportMetric(perQP(heap1, heap0), "heap-B/QP")
	b.ReportMetric(perQP(stacks1, stacks0), "stack-B/QP")
	if kernelOK {
		b.ReportMetric(perQP(kernel1, kernel0), "kernel-B/QP")
	}
	b.ReportMetric(float64(goroutines-goroutines1)/n, "goroutines/QP")
	b.ReportMetric(float64(pairs)/setup.Seconds(), "conn/s")

	verify, err := scaleWrites(ctx, client, server, pairs)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(verify.Microseconds())/scaleVerify, "verify-µs")
	time.Sleep(200 * time.Millisecond)
	heap2, stacks2 := heapStacks()
	b.ReportMetric(perQP(heap2+stacks2, heap0+stacks0), "B/QP-after")
	b.ReportMetric(n, "QPs")
}

// scaleAccept accepts n connections into server's queue pairs, at most
// scaleDialers at once; each request names its pair in its private data.
func scaleAccept(ctx context.Context, ln *Listener, server *scaleSide, n int) error {
	pairs := len(server.qps)
	var wg sync.WaitGroup
	defer wg.Wait()
	errs := make(chan error, n)
	slots := make(chan struct{}, scaleDialers)
	for range n {
		cr, err := ln.AcceptRequest(ctx)
		if err != nil {
			return err
		}
		k := int(binary.BigEndian.Uint32(cr.PrivateData()))
		if k < 0 || k >= pairs || server.qps[k] != nil {
			return fmt.Errorf("a request for pair %d", k)
		}
		qp, err := server.pd.NewQP(server.cq, server.caps)
		if err != nil {
			return err
		}
		server.qps[k] = qp
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := cr.Accept(ctx, qp); err != nil {
				errs <- fmt.Errorf("accepting pair %d: %w", k, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil if none
}

// scaleDial connects client's queue pairs, scaleDialers at once, pair k
// to addrs[k%len(addrs)].
func scaleDial(ctx context.Context, addrs []string, client *scaleSide, pairs int) error {
	next := make(chan int)
	errs := make(chan error, scaleDialers)
	var wg sync.WaitGroup
	for range scaleDialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				qp, err := client.pd.NewQP(client.cq, client.caps)
				if err == nil {
					client.qps[k] = qp
					err = qp.Connect(ctx, "tcp", addrs[k%len(addrs)], WithPrivateData(binary.BigEndian.AppendUint32(nil, uint32(k))))
				}
				if err != nil {
					errs <- fmt.Errorf("connecting pair %d: %w", k, err)
					return
				}
			}
		}()
	}
	var err error
feed:
	for k := range pairs {
		select {
		case next <- k:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err = <-errs:
	default:
	}
	return err
}

// scaleWrites has scaleVerify queue pairs, picked at random from both
// sides, each RDMA Write a pattern of its own into the other side's
// region and Read it back; the read-back must hold the pattern, and the
// queue pairs must not have failed. It returns the
// time the Writes and Reads took, one after the other.
func scaleWrites(ctx context.Context, client, server *scaleSide, pairs int) (time.Duration, error) {
	var elapsed time.Duration
	wcs := make([]WorkCompletion, 4)
	for j, pick := range rand.Perm(2 * pairs)[:scaleVerify] {
		from, to := client, server
		if pick >= pairs {
			from, to = server, client
		}
		qp := from.qps[pick%pairs]
		off := j * scaleLen
		want := pattern(scaleLen, byte(j))
		copy(from.src.Bytes()[off:], want)
		remote := to.target.Remote(off)
		t := time.Now()
		_, err := qp.PostSendBatch([]SendWR{
			{ID: 1, Op: OpWrite, SGL: []SGE{from.src.SGE(off, scaleLen)}, Remote: remote},
			{ID: 2, Op: OpRead, Flags: Signaled, SGL: []SGE{from.sink.SGE(off, scaleLen)}, Remote: remote},
		})
		if err != nil {
			return 0, fmt.Errorf("queue pair %d: %w", pick, err)
		}
		n, err := from.cq.Wait(ctx, wcs)
		if err != nil {
			return 0, fmt.Errorf("queue pair %d: %w", pick, err)
		}
		elapsed += time.Since(t)
		if n != 1 || wcs[0].QPN != qp.QPN() || wcs[0].Op != WCRDMARead {
			return 0, fmt.Errorf("queue pair %d: completions %+v", pick, wcs[:n])
		}
		if err := wcs[0].Err(); err != nil {
			return 0, fmt.Errorf("queue pair %d: %w", pick, err)
		}
		// The Read is answered after the Write is placed (RFC 5040
		// §5.5), from the target's memory: the read-back holds what the
		// Write put there. (The target's bytes are not read here: no
		// completion on this goroutine's side orders that access after
		// the placement.)
		if !bytes.Equal(from.sink.Bytes()[off:off+scaleLen], want) {
			return 0, fmt.Errorf("queue pair %d: the read-back does not hold the Write's bytes", pick)
		}
	}
	return elapsed, nil
}

// scaleClose closes every queue pair, scaleDialers at once, clients first,
// and waits for their goroutines to end.
func scaleClose(sides ...*scaleSide) {
	for _, s := range sides {
		next := make(chan *QP)
		var wg sync.WaitGroup
		for range scaleDialers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for qp := range next {
					qp.Close()
				}
			}()
		}
		for _, qp := range s.qps {
			if qp != nil {
				next <- qp
			}
		}
		close(next)
		wg.Wait()
	}
}

// sockstatTCPMem is the kernel's TCP buffer memory in bytes, from the
// "TCP:" line of /proc/net/sockstat (pages), where the system has it.
func sockstatTCPMem() (uint64, bool) {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "TCP:" {
			continue
		}
		for i := 1; i+1 < len(f); i += 2 {
			if f[i] == "mem" {
				pages, err := strconv.ParseUint(f[i+1], 10, 64)
				return pages * uint64(os.Getpagesize()), err == nil
			}
		}
	}
	return 0, false
}
