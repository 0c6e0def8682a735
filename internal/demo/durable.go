package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/units"
	"github.com/iwarp-go/iwarp-go/pmemsink"
)

const (
	durableRegion = 1 << 20
	durableWrite  = 4 << 10
	durableAt     = 8192
)

// durable serves a file in the temporary directory as remote persistent
// memory (package pmemsink), writes 4 KiB into it over loopback, flushes
// them by the best method the sink offers, and checks them in the region
// and in the file. It returns the bytes moved.
func durable(ctx context.Context, out io.Writer) (moved int64, err error) {
	dir, err := os.MkdirTemp("", "iwarp-go-demo-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "region")
	s, err := pmemsink.Open(path, durableRegion)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	srv, err := pmemsink.NewServer(s, pmemsink.ServerConfig{})
	if err != nil {
		return 0, err
	}
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() {
		ln.Close()
		err = errors.Join(err, srv.Shutdown(ctx), <-served)
	}()

	fmt.Fprintf(out, "\ndurable write: a pmemsink region, %v\n", s.Info())
	in, err := pmemsink.Dial(ctx, "tcp", ln.Addr().String(), pmemsink.WithGPSPM())
	if err != nil {
		return 0, err
	}
	defer in.Close()
	data := make([]byte, durableWrite)
	pattern(data, 6)
	t0 := time.Now()
	if err := in.Write(ctx, durableAt, data); err != nil {
		return 0, err
	}
	res, err := in.Flush(ctx, durableAt, durableWrite)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	back := make([]byte, durableWrite)
	if err := in.Read(ctx, durableAt, back); err != nil {
		return 0, err
	}
	if err := checkPattern(back, 6); err != nil {
		return 0, fmt.Errorf("read back: %w", err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(file[durableAt:durableAt+durableWrite], data) {
		return 0, errors.New("the file does not hold the bytes written")
	}
	fmt.Fprintf(out, "  write + flush  client -> sink  %9s  %v after %s; read back and found in the file\n",
		units.Bytes(durableWrite), res, units.Duration(d))
	return 2 * durableWrite, nil
}
