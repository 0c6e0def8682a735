//go:build linux || darwin || freebsd

package pmemsink_test

import (
	"fmt"
	"os"
	"path/filepath"

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
