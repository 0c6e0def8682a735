//go:build linux || darwin || freebsd

package pmemsink

import (
	"fmt"
	"testing"
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
	type mode struct {
		name string
		dir  func(testing.TB) string
		opts []Option
	}
	modes := []mode{
		{"volatile-tmpfs", memDir, nil},
		{"msync-disk", diskDir, []Option{WithMode(ModeMsync)}},
	}
	for _, fl := range cpuFlushers() {
		modes = append(modes, mode{"dax-path-" + fl.name, memDir, []Option{withTestFlush(fl.name)}})
	}
	for _, m := range modes {
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
