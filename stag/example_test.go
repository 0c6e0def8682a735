package stag_test

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/stag"
)

// Register a buffer for remote writes and validate an inbound tagged segment
// the way the receive path does: look up (STag, TO, length), then place the
// payload straight into the returned slice.
func Example() {
	tab, err := stag.NewTable()
	if err != nil {
		panic(err)
	}
	pd := tab.NewPD()

	buf := make([]byte, 64)
	mr, err := pd.Register(buf, stag.LocalWrite|stag.RemoteWrite, stag.BaseZero())
	if err != nil {
		panic(err)
	}
	// The peer learns (mr.STag(), mr.TO(0)) and writes 5 bytes at offset 16.
	dst, f := pd.Lookup(mr.STag(), mr.TO(16), 5, stag.RemoteWrite)
	if f != stag.OK {
		panic(f)
	}
	copy(dst, "hello") // in conn: io.ReadFull(payload, dst)
	fmt.Printf("%q\n", buf[16:21])

	// A segment that runs past the end of the region is refused; the
	// connection engine (package conn) maps the failure to its Terminate.
	_, f = pd.Lookup(mr.STag(), mr.TO(60), 5, stag.RemoteWrite)
	fmt.Println(f)
	// Output:
	// "hello"
	// base or bounds violation
}

// Regions advertised by virtual address, as rping and perftest do: the TO of
// the first byte is the buffer's address.
func ExampleBaseVA() {
	tab, _ := stag.NewTable()
	pd := tab.NewPD()
	buf := make([]byte, 4096)
	mr, _ := pd.Register(buf, stag.LocalRead|stag.RemoteRead, stag.BaseVA())

	src, f := pd.Lookup(mr.STag(), mr.TO(100), 16, stag.RemoteRead)
	fmt.Println(f, len(src), &src[0] == &buf[100])
	_, f = pd.Lookup(mr.STag(), mr.TO(0)-1, 1, stag.RemoteRead)
	fmt.Println(f)
	// Output:
	// ok 16 true
	// base or bounds violation
}

// A peer's Send with Invalidate: accepted for a valid region of the
// stream's PD, refused otherwise.
func ExamplePD_RemoteInvalidate() {
	tab, _ := stag.NewTable()
	pd, other := tab.NewPD(), tab.NewPD()
	mr, _ := pd.Register(make([]byte, 64), stag.LocalWrite|stag.RemoteWrite, stag.BaseZero())

	fmt.Println(other.RemoteInvalidate(mr.STag()))

	fmt.Println(pd.RemoteInvalidate(mr.STag()), mr.State())
	_, f := pd.Lookup(mr.STag(), 0, 1, stag.RemoteWrite)
	fmt.Println(f)
	// Output:
	// STag cannot be invalidated (other protection domain)
	// ok invalid
	// STag invalidated
}

// Local work pins a region so that it cannot be deregistered under it.
func ExampleRegion_Acquire() {
	tab, _ := stag.NewTable()
	pd := tab.NewPD()
	mr, _ := pd.Register(make([]byte, 64), stag.LocalRead, stag.BaseZero())

	if _, f := pd.CheckLocal(mr, 0, 64, stag.LocalRead); f == stag.OK {
		_ = mr.Acquire() // posted work request holds the region
	}
	fmt.Println(mr.Deregister())
	mr.Release() // the work request completed
	fmt.Println(mr.Deregister())
	// Output:
	// stag: region busy: references held
	// <nil>
}

// Lend a peer 16 bytes of a region through a type 2 window tied to one
// stream: the window's bounds and stream are checked like a region's PD.
func ExampleWindow_Bind() {
	tab, err := stag.NewTable()
	if err != nil {
		panic(err)
	}
	pd := tab.NewPD()
	buf := make([]byte, 64)
	mr, err := pd.Register(buf, stag.LocalWrite|stag.RemoteWrite|stag.MWBind, stag.BaseZero())
	if err != nil {
		panic(err)
	}
	w, err := pd.AllocWindow(stag.WindowType2)
	if err != nil {
		panic(err)
	}
	type stream struct{ name string }
	mine, theirs := &stream{"qp 1"}, &stream{"qp 2"}
	b, _, err := w.Bind(stag.BindSpec{Region: mr, Offset: 32, Length: 16, Access: stag.RemoteWrite,
		ZeroBased: true, Key: w.STag().Key() + 1, QP: mine})
	if err != nil {
		panic(err)
	}
	r, dst, f := pd.LookupRemoteFrom(b.STag(), 0, 5, stag.RemoteWrite, mine)
	fmt.Println(f)
	copy(dst, "hello")
	r.ReleaseRemote()
	_, _, f = pd.LookupRemoteFrom(b.STag(), 12, 5, stag.RemoteWrite, mine)
	fmt.Println(f)
	_, _, f = pd.LookupRemoteFrom(b.STag(), 0, 5, stag.RemoteWrite, theirs)
	fmt.Println(f)
	fmt.Println(pd.RemoteInvalidateFrom(b.STag(), mine), w.Bound())
	fmt.Printf("%q\n", buf[32:37])
	// Output:
	// ok
	// base or bounds violation
	// STag not associated with this stream (window of another queue pair)
	// ok false
	// "hello"
}
