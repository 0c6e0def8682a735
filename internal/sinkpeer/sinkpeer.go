// Package sinkpeer is iwarp-peer's remote persistent memory: Serve serves
// a file as a pmemsink region to iwarp-go and librpma initiators until
// interrupted, and Put and Get write local bytes into such a region, make
// them durable, and read them back. Offsets are region offsets.
package sinkpeer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/units"
	"github.com/iwarp-go/iwarp-go/pmemsink"
)

// DefaultPort is the port the commands use unless told otherwise.
const DefaultPort = 7204

// SinkConfig is one run of Serve.
type SinkConfig struct {
	Addr string // "" listens on every address
	Port int    // 0 picks a free port (Ready is told which)
	File string
	Size int64 // 0: the file's size
	Mode pmemsink.Mode
	// ReadOnly serves the region for RDMA Reads only.
	ReadOnly bool
	// DataOffset is the data_offset of librpma's descriptor blob: where its
	// example clients put their data (8-aligned).
	DataOffset uint16
	// Out receives the account of the run: the sink, each connection,
	// the final line.
	Out   io.Writer
	Ready func(net.Addr)
	// Listening, if set, is given the listener once it listens (metrics).
	Listening func(*conn.Listener)
	// Opened, if set, is given the sink once it is open (metrics).
	Opened func(*pmemsink.Sink)
	// Options are added to the listener's (limits, a logger, tests).
	Options []conn.Option
}

// Serve serves the file until ctx ends, then finishes the work in flight
// (every flush asked for is persisted and answered), closes the
// connections, persists the whole region, prints one line and returns nil.
func Serve(ctx context.Context, cfg SinkConfig) error {
	s, err := pmemsink.Open(cfg.File, cfg.Size, pmemsink.WithMode(cfg.Mode))
	if err != nil {
		return err
	}
	if cfg.Opened != nil {
		cfg.Opened(s)
	}
	ln, err := conn.Listen(ctx, "tcp", net.JoinHostPort(cfg.Addr, strconv.Itoa(cfg.Port)), cfg.Options...)
	if err != nil {
		return errors.Join(err, s.Close())
	}
	if cfg.Listening != nil {
		cfg.Listening(ln)
	}
	var mu sync.Mutex // orders the lines
	say := func(format string, a ...any) {
		mu.Lock()
		fmt.Fprintf(cfg.Out, format+"\n", a...)
		mu.Unlock()
	}
	var stopping atomic.Bool
	var conns, written, persists atomic.Uint64
	srv, err := pmemsink.NewServer(s, pmemsink.ServerConfig{
		ReadOnly:   cfg.ReadOnly,
		DataOffset: cfg.DataOffset,
		Accepted: func(c *pmemsink.ServerConn) {
			conns.Add(1)
			mr := c.Registration().MR()
			cd, _ := c.Registration().CommonData(cfg.DataOffset)
			say("conn %d from %v: STag %#08x, %s region at TO %#x, usage %#02x (%v), direct_write_to_pmem %d",
				c.ID(), c.RemoteAddr(), uint32(mr.STag()), units.Bytes(int64(mr.Len())), mr.Remote(0).TO,
				uint8(cd.MR.Usage), cd.MR.Usage, b2i(cd.PeerCfg.DirectWriteToPmem))
		},
		Closed: func(c *pmemsink.ServerConn) {
			st := c.Stats()
			written.Add(st.BytesWritten)
			persists.Add(st.Persists)
			if !stopping.Load() {
				say("conn %d closed: %s written in %d placements, %d persists (%d GPSPM requests); %v",
					c.ID(), units.Bytes(int64(st.BytesWritten)), st.Writes, st.Persists, st.GPSPM, ended(c.Err()))
			}
		},
		Failed: func(remote net.Addr, err error) { say("connection from %v failed: %v", remote, err) },
	})
	if err != nil {
		return errors.Join(err, ln.Close(), s.Close())
	}
	say("sink: %v", s.Info())
	say("listening on %v: STag per connection, region %s, read-only %v", ln.Addr(), units.Bytes(s.Size()), cfg.ReadOnly)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	stopping.Store(true)
	lerr := ln.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	serr := srv.Shutdown(sctx)
	if err == nil {
		err = <-served
	}
	cerr := s.Close() // persists the whole region
	if err = errors.Join(err, lerr, serr, cerr); err != nil {
		return err
	}
	why := "stopped"
	if c := context.Cause(ctx); c != nil {
		why = fmt.Sprintf("stopped (%v)", c)
	}
	say("sink: %s: %d connections, %s written, %d persists; region persisted (%v)",
		why, conns.Load(), units.Bytes(int64(written.Load())), persists.Load(), s.Info().Mode)
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ended describes why a connection ended.
func ended(err error) string {
	switch {
	case err == nil, errors.Is(err, conn.ErrPeerClosed):
		return "the peer closed"
	case errors.Is(err, conn.ErrQPClosed):
		return "closed"
	}
	return err.Error()
}
