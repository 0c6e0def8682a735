//go:build linux || darwin || freebsd

package pmemsink_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/pmemsink"
)

// A connection's view of a sink: place bytes, then make them persistent
// before acknowledging a flush.
func Example() {
	dir, _ := os.MkdirTemp("", "pmemsink-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "region")

	sink, err := pmemsink.Open(path, 1<<20, pmemsink.WithMode(pmemsink.ModeMsync))
	if err != nil {
		panic(err)
	}
	tr, err := sink.Attach(nil) // one per connection
	if err != nil {
		panic(err)
	}

	// Placement of an RDMA Write at region offset 4096.
	err = pmemsink.Contain(func() error {
		copy(sink.Bytes()[4096:], "durable hello")
		return nil
	})
	if err != nil {
		panic(err) // a fault in the mapping: end this connection
	}
	tr.Placed(4096, 13)

	// An RDMA Read arrives: answer it once the connection's writes are
	// persistent.
	if !tr.Clean() {
		if err := tr.PersistAll(); err != nil {
			panic(err) // never acknowledge
		}
	}
	fmt.Println(sink.Info().Mode, tr.Clean())
	tr.Detach()
	sink.Close()

	b, _ := os.ReadFile(path)
	fmt.Printf("%q\n", b[4096:4109])
	// Output:
	// msync true
	// "durable hello"
}

// A sink served to an initiator over loopback: the initiator writes, asks
// for the bytes to be made durable, and learns how and what was promised.
// A volatile sink promises placement only.
func ExampleServer() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "pmemsink-example-")
	defer os.RemoveAll(dir)
	sink, err := pmemsink.Open(filepath.Join(dir, "region"), 1<<20, pmemsink.WithMode(pmemsink.ModeVolatile))
	if err != nil {
		panic(err)
	}
	defer sink.Close()
	srv, _ := pmemsink.NewServer(sink, pmemsink.ServerConfig{})
	ln, _ := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	in, err := pmemsink.Dial(ctx, "tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	fmt.Println("region:", in.Remote().Size, "bytes, usage", in.Remote().Usage)
	_ = in.Write(ctx, 4096, []byte("durable hello"))
	res, err := in.Flush(ctx, 4096, 13)
	fmt.Println(res, err)
	_, err = in.Flush(ctx, 4096, 13, pmemsink.RequirePersistent())
	fmt.Println(errors.Is(err, pmemsink.ErrNotPersistent))
	// The same in one call, the Write and the flush's request leaving
	// together: a durable write's latency is then close to one round trip.
	res, err = in.WriteFlush(ctx, 8192, []byte("durable again"), pmemsink.UseMethod(pmemsink.MethodReadAfterWrite))
	fmt.Println(res, err)
	in.Close()

	ln.Close()
	_ = srv.Shutdown(ctx)
	<-served
	// Output:
	// region: 1048576 bytes, usage READ_SRC|WRITE_DST|FLUSH_TYPE_VISIBILITY
	// flush-extension, placed <nil>
	// true
	// read-after-write, placed <nil>
}

// A sink larger than the pre-fault limit is not touched at Open; a lower
// limit keeps Open quick for regions that are written sparsely.
func ExampleWithPrefault() {
	dir, _ := os.MkdirTemp("", "pmemsink-example-")
	defer os.RemoveAll(dir)
	s, err := pmemsink.Open(filepath.Join(dir, "region"), 4<<20, pmemsink.WithPrefault(1<<20))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println("pre-faulted:", s.Info().Prefaulted)
	// Output: pre-faulted: false
}
