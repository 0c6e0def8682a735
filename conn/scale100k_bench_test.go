//go:build linux

package conn

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkScale100000QPs: 50,000 loopback connections, 100,000 queue
// pairs, both ends in this process, set up with MPA revision 2 and
// private data (each request names its pair), then every pair served one
// 4 KiB RDMA Write and an RDMA Read of it back. It raises RLIMIT_NOFILE
// itself and skips where it cannot; the connections go to several
// listeners, because 50,000 from 127.0.0.1 to one port would outnumber
// the ephemeral ports. Besides benchScale's metrics it reports the totals:
// heap-MiB, stack-MiB and RSS-MiB grown while the queue pairs were set up
// (RSS from /proc/self/status), and write-read-µs, the mean time of one
// pair's Write and Read, the pairs one after the other.
//
//	go test -run '^$' -bench Scale100000QPs -benchtime 1x -timeout 30m ./conn
func BenchmarkScale100000QPs(b *testing.B) { benchScaleAll(b, 50000) }

func benchScaleAll(b *testing.B, pairs int) {
	restore, err := raiseNoFile(uint64(2*pairs + 4096))
	if err != nil {
		b.Skipf("%d queue pairs need as many file descriptors: %v", 2*pairs, err)
	}
	defer restore()
	listeners, err := scaleListeners(pairs)
	if err != nil {
		b.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	client, server := newScaleSide(b, pairs, NewPD()), newScaleSide(b, pairs, NewPD())
	lns := make([]*Listener, listeners)
	addrs := make([]string, listeners)
	for i := range lns {
		if lns[i], err = Listen(ctx, "tcp", "127.0.0.1:0"); err != nil {
			b.Fatal(err)
		}
		addrs[i] = lns[i].Addr().String()
	}
	acceptErr := make(chan error, listeners)
	var accepting sync.WaitGroup
	defer func() {
		cancel()
		for _, ln := range lns {
			ln.Close()
		}
		accepting.Wait()
		scaleClose(client, server)
	}()
	kernel0, kernelOK := sockstatTCPMem()
	heap0, stacks0 := heapStacks()
	rss0, rssOK := processRSS()

	start := time.Now()
	for i, ln := range lns {
		// Pair k goes to listener k % listeners (scaleDial).
		n := pairs / listeners
		if i < pairs%listeners {
			n++
		}
		accepting.Add(1)
		go func() {
			defer accepting.Done()
			acceptErr <- scaleAccept(ctx, ln, server, n)
		}()
	}
	if err := scaleDial(ctx, addrs, client, pairs); err != nil {
		b.Fatal(err)
	}
	accepting.Wait()
	setup := time.Since(start)
	close(acceptErr)
	for err := range acceptErr {
		if err != nil {
			b.Fatal(err)
		}
	}
	if res := client.qps[0].Negotiated(); res == nil || res.Revision != 2 {
		b.Fatalf("negotiated %v, not MPA revision 2", res)
	}

	time.Sleep(time.Second) // every goroutine parks
	heap1, stacks1 := heapStacks()
	rss1, _ := processRSS()
	kernel1, _ := sockstatTCPMem()
	n := float64(2 * pairs)
	const mib = 1 << 20
	grown := func(after, before uint64) float64 { return float64(after) - float64(before) }
	b.ReportMetric(grown(heap1+stacks1, heap0+stacks0)/n, "B/QP")
	b.ReportMetric(grown(heap1, heap0)/mib, "heap-MiB")
	b.ReportMetric(grown(stacks1, stacks0)/mib, "stack-MiB")
	if rssOK {
		b.ReportMetric(grown(rss1, rss0)/mib, "RSS-MiB")
		b.ReportMetric(grown(rss1, rss0)/n, "RSS-B/QP")
	}
	if kernelOK {
		b.ReportMetric(grown(kernel1, kernel0)/n, "kernel-B/QP")
	}
	b.ReportMetric(float64(pairs)/setup.Seconds(), "conn/s")

	served, err := scaleServeAll(ctx, client, server)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(served.Microseconds())/float64(pairs), "write-read-µs")
	time.Sleep(time.Second)
	heap2, stacks2 := heapStacks()
	b.ReportMetric(grown(heap2+stacks2, heap0+stacks0)/n, "B/QP-after")
	b.ReportMetric(n, "QPs")
	b.ReportMetric(float64(listeners), "listeners")
}

// scaleServeAll has every client queue pair RDMA Write 4 KiB of a pattern
// of its own into the server's region and Read it back, one pair after
// the other; the read-back must hold the pattern. It returns the time
// the Writes and Reads took.
func scaleServeAll(ctx context.Context, client, server *scaleSide) (time.Duration, error) {
	wcs := make([]WorkCompletion, 4)
	start := time.Now()
	for k, qp := range client.qps {
		off := (k % scaleVerify) * scaleLen
		want := pattern(scaleLen, byte(k))
		copy(client.src.Bytes()[off:], want)
		remote := server.target.Remote(off)
		_, err := qp.PostSendBatch([]SendWR{
			{ID: 1, Op: OpWrite, SGL: []SGE{client.src.SGE(off, scaleLen)}, Remote: remote},
			{ID: 2, Op: OpRead, Flags: Signaled, SGL: []SGE{client.sink.SGE(off, scaleLen)}, Remote: remote},
		})
		if err != nil {
			return 0, fmt.Errorf("pair %d: %w", k, err)
		}
		n, err := client.cq.Wait(ctx, wcs)
		if err != nil {
			return 0, fmt.Errorf("pair %d: %w", k, err)
		}
		if n != 1 || wcs[0].QPN != qp.QPN() || wcs[0].Op != WCRDMARead {
			return 0, fmt.Errorf("pair %d: completions %+v", k, wcs[:n])
		}
		if err := wcs[0].Err(); err != nil {
			return 0, fmt.Errorf("pair %d: %w", k, err)
		}
		// The Read is answered after the Write is placed (RFC 5040 §5.5).
		if !bytes.Equal(client.sink.Bytes()[off:off+scaleLen], want) {
			return 0, fmt.Errorf("pair %d: the read-back does not hold the Write's bytes", k)
		}
	}
	return time.Since(start), nil
}

// scaleListeners is how many listening ports pairs connections from
// 127.0.0.1 need: each port's connections at most half the ephemeral
// port range (other processes use ports too).
func scaleListeners(pairs int) (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, fmt.Errorf("ip_local_port_range %q", b)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || hi-lo < 2 {
		return 0, fmt.Errorf("ip_local_port_range %q", b)
	}
	per := (hi - lo + 1) / 2
	return (pairs + per - 1) / per, nil
}

// processRSS is this process's resident set (VmRSS), in bytes.
func processRSS() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, false
			}
			kb, err := strconv.ParseUint(f[0], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
