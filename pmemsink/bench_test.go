//go:build linux || darwin || freebsd

package pmemsink

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

// BenchmarkLocalPersist is the local side of the durable-write benchmark:
// write SIZE bytes into the mapping (under Contain, with the tracker told,
// as placement does) and persist what the tracker holds after every EVERY
// writes, in each mode this machine offers: volatile on tmpfs, msync on
// the disk (a real msync(MS_SYNC) per persist), and the DAX persist loop
// with each cache-line instruction the CPU has, run over page cache (the
// cost of the instructions, not of DAX media; never durable). ns/op is per
// write; MB/s counts the bytes written.
func BenchmarkLocalPersist(b *testing.B) {
	modes := []benchMode{
		{"volatile-tmpfs", memDir, nil},
		{"msync-disk", diskDir, []Option{WithMode(ModeMsync)}},
	}
	for _, fl := range cpuFlushers() {
		modes = append(modes, benchMode{"dax-path-" + fl.name, memDir, []Option{withTestFlush(fl.name)}})
	}
	for _, m := range append(modes, realDAXModes()...) {
		for _, size := range []int{1 << 10, 4 << 10, 64 << 10} {
			for _, every := range []int{1, 16, 256} {
				name := fmt.Sprintf("%s/%dKiB/persist-every-%d", m.name, size>>10, every)
				b.Run(name, func(b *testing.B) {
					region := int64(every*size) * 2
					s := openT(b, tpath(m.dir(b), "bench"), max(region, 1<<20), m.opts...)
					tr, err := s.Attach(nil)
					if err != nil {
						b.Fatal(err)
					}
					defer tr.Detach()
					src := make([]byte, size)
					for i := range src {
						src[i] = byte(i)
					}
					mem := s.Bytes()
					var off uint64
					b.SetBytes(int64(size))
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if err := Contain(func() error {
							copy(mem[off:], src)
							return nil
						}); err != nil {
							b.Fatal(err)
						}
						tr.Placed(off, uint64(size))
						off += uint64(size)
						if (i+1)%every == 0 {
							if err := tr.PersistAll(); err != nil {
								b.Fatal(err)
							}
							off = 0
						}
					}
				})
			}
		}
	}
}

func BenchmarkTrackerPlaced(b *testing.B) {
	s := openT(b, tpath(memDir(b), "f"), 64<<20, WithMode(ModeVolatile))
	tr, err := s.Attach(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Detach()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.Placed(uint64(i%(1<<14))*4096, 4096) // sequential: extends one range
	}
}

func BenchmarkDirtySetScattered(b *testing.B) {
	d := NewDirtySet(64, 64)
	b.ReportAllocs()
	x := uint64(1)
	for i := 0; i < b.N; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		d.Add(x>>34, 100) // random offsets in 1 GiB: the set stays full and widens
	}
}

func BenchmarkContain(b *testing.B) {
	s := openT(b, tpath(memDir(b), "f"), 4096)
	mem := s.Bytes()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = Contain(func() error { mem[i&4095]++; return nil })
	}
}

// benchModes are the modes the remote benchmarks serve: volatile on tmpfs,
// msync on the disk, and the DAX persist loop with the best cache-line
// instruction the CPU has, over page cache (the instruction's cost, not
// DAX media's).
func benchModes() []benchMode {
	modes := []benchMode{
		{"volatile-tmpfs", memDir, nil},
		{"msync-disk", diskDir, []Option{WithMode(ModeMsync)}},
	}
	if fls := cpuFlushers(); len(fls) > 0 {
		modes = append(modes, benchMode{"dax-path-" + fls[0].name, memDir, []Option{withTestFlush(fls[0].name)}})
	}
	return append(modes, realDAXModes()...)
}

// realDAXModes is real DAX where $IWARP_PMEM_DAX names a DAX file system
// (the siw guest's ext4 -o dax on legacy pmem): MAP_SYNC and the CPU's
// write-back instruction, the mode the durable-write goal is judged in
// besides volatile. Elsewhere it is empty.
func realDAXModes() []benchMode {
	if os.Getenv(daxEnv) == "" {
		return nil
	}
	return []benchMode{{"dax-fsdax", daxRoot, []Option{WithMode(ModeDAX)}}}
}

type benchMode struct {
	name string
	dir  func(testing.TB) string
	opts []Option
}

// benchRemote serves a sink of the mode on loopback, in this process, and
// connects an initiator to it.
func benchRemote(b *testing.B, m benchMode, region int64) (*Initiator, context.Context) {
	s := openT(b, tpath(m.dir(b), "bench"), max(region, 1<<20), m.opts...)
	srv, err := NewServer(s, ServerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	in, err := Dial(ctx, "tcp", ln.Addr().String(), WithGPSPM(), WithStaging(16<<20))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		ln.Close()
		if err := srv.Shutdown(ctx); err != nil {
			b.Error(err)
		}
		<-done
		cancel()
	})
	return in, ctx
}

// BenchmarkDurableWrite is the remote side of the durable-write benchmark:
// an initiator RDMA-Writes SIZE bytes into a served sink and flushes what
// it wrote after every EVERY writes, by each method, in each mode;
// BenchmarkLocalPersist does the same work locally. Both run over loopback
// TCP in this process (initiator and target share the CPUs). ns/op is per
// write; MB/s counts the bytes written; cpu-ns/op and ctxsw/op are the
// process's, both sides together, per write.
func BenchmarkDurableWrite(b *testing.B) {
	for _, m := range benchModes() {
		for _, method := range []Method{MethodExtension, MethodGPSPM, MethodReadAfterWrite} {
			for _, size := range []int{1 << 10, 4 << 10, 64 << 10} {
				for _, every := range []int{1, 16, 256} {
					name := fmt.Sprintf("%s/%v/%dKiB/flush-every-%d", m.name, method, size>>10, every)
					b.Run(name, func(b *testing.B) {
						in, ctx := benchRemote(b, m, int64(every*size))
						src := make([]byte, size)
						for i := range src {
							src[i] = byte(i)
						}
						opt := UseMethod(method)
						var off uint64
						b.SetBytes(int64(size))
						b.ReportAllocs()
						b.ResetTimer()
						cost := testutil.StartCost()
						defer cost.Report(b)
						for i := 0; i < b.N; i++ {
							if err := in.Write(ctx, off, src); err != nil {
								b.Fatal(err)
							}
							off += uint64(size)
							if (i+1)%every == 0 || i == b.N-1 {
								if _, err := in.Flush(ctx, 0, off, opt); err != nil {
									b.Fatal(err)
								}
								off = 0
							}
						}
					})
				}
			}
		}
	}
}

// BenchmarkDurableWriteFlush is BenchmarkDurableWrite's flush-every-1
// rows through WriteFlush: the Write and the flush's request posted
// together.
func BenchmarkDurableWriteFlush(b *testing.B) {
	for _, m := range benchModes() {
		for _, method := range []Method{MethodExtension, MethodGPSPM, MethodReadAfterWrite} {
			for _, size := range []int{1 << 10, 4 << 10, 64 << 10} {
				b.Run(fmt.Sprintf("%s/%v/%dKiB", m.name, method, size>>10), func(b *testing.B) {
					in, ctx := benchRemote(b, m, int64(size))
					src := make([]byte, size)
					opt := UseMethod(method)
					b.SetBytes(int64(size))
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if _, err := in.WriteFlush(ctx, 0, src, opt); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkRoundTrip8 is the round trip the durable-write goal adds to a
// local persist: an 8-byte RDMA Read of a served sink on a connection that
// wrote nothing (so no persist), through the same initiator.
func BenchmarkRoundTrip8(b *testing.B) {
	for _, m := range benchModes() {
		b.Run(m.name, func(b *testing.B) {
			in, ctx := benchRemote(b, m, 1<<20)
			opt := UseMethod(MethodReadAfterWrite)
			b.ReportAllocs()
			b.ResetTimer()
			cost := testutil.StartCost()
			defer cost.Report(b)
			for i := 0; i < b.N; i++ {
				if _, err := in.Flush(ctx, 0, 8, opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlainWriteRead is the same pattern on memory that is no sink,
// with conn alone: a 4 KiB RDMA Write followed by an 8-byte RDMA Read,
// waiting for the Read. What a remote durable write costs beyond it is
// pmemsink's; the rest is the transport's.
func BenchmarkPlainWriteRead(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	spd := conn.NewPD()
	smr, err := spd.Register(make([]byte, 1<<20), conn.LocalWrite|conn.RemoteWrite|conn.RemoteRead)
	if err != nil {
		b.Fatal(err)
	}
	sqp, err := spd.NewQP(conn.NewCQ(64), conn.QPCaps{})
	if err != nil {
		b.Fatal(err)
	}
	defer sqp.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(ctx, sqp) }()
	pd := conn.NewPD()
	cq := conn.NewCQ(64)
	mr, err := pd.Register(make([]byte, 8192), conn.LocalWrite)
	if err != nil {
		b.Fatal(err)
	}
	qp, err := conn.Dial(ctx, "tcp", ln.Addr().String(), pd, cq, conn.QPCaps{})
	if err != nil {
		b.Fatal(err)
	}
	defer qp.Close()
	if err := <-accepted; err != nil {
		b.Fatal(err)
	}
	wsgl := []conn.SGE{mr.SGE(0, 4096)}
	rsgl := []conn.SGE{mr.SGE(4096, 8)}
	wcs := make([]conn.WorkCompletion, 4)
	b.SetBytes(4096)
	b.ReportAllocs()
	b.ResetTimer()
	cost := testutil.StartCost()
	defer cost.Report(b)
	for i := 0; i < b.N; i++ {
		if err := qp.PostSend(conn.SendWR{Op: conn.OpWrite, SGL: wsgl, Remote: smr.Remote(0)}); err != nil {
			b.Fatal(err)
		}
		if err := qp.PostSend(conn.SendWR{Op: conn.OpRead, Flags: conn.Signaled, SGL: rsgl, Remote: smr.Remote(0)}); err != nil {
			b.Fatal(err)
		}
		n, err := cq.Wait(ctx, wcs)
		if err != nil || n != 1 || wcs[0].Status != conn.WCSuccess {
			b.Fatal(err, n, wcs[0].Status)
		}
	}
}
