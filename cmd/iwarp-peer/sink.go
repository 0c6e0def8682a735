package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"

	"github.com/iwarp-go/iwarp-go/internal/connlog"
	"github.com/iwarp-go/iwarp-go/internal/sinkpeer"
	"github.com/iwarp-go/iwarp-go/internal/units"
	"github.com/iwarp-go/iwarp-go/pmemsink"
)

// peerFlags are -a and -p of sink, put and get.
func peerFlags(f *flags, p *sinkpeer.PeerConfig, addrHelp string) {
	f.StringVar(&p.Addr, "a", p.Addr, addrHelp)
	f.IntVar(&p.Port, "p", sinkpeer.DefaultPort, "`port`")
}

func runSink(ctx context.Context, args []string, std stdio) error {
	var p sinkpeer.PeerConfig
	var size, mode string
	cfg := sinkpeer.SinkConfig{Out: std.out}
	f := newFlags("sink", std, func(w io.Writer) {
		fmt.Fprintln(w, "usage: iwarp-peer sink [-a ADDR] [-p PORT] --file PATH [--size BYTES] [--mode auto|dax|msync|volatile] [--read-only] [--data-offset N]")
		fmt.Fprintln(w, "Serves a file as remote persistent memory until interrupted; each connection gets its own registration and librpma's descriptor in the MPA Reply.")
	}, true)
	peerFlags(f, &p, "`address` to listen on (default every address)")
	f.StringVar(&cfg.File, "file", "", "the `file` (or device-DAX device) to serve")
	f.StringVar(&size, "size", "0", "region `size` (k/m/g suffixes; 0: the file's size); a larger size extends the file")
	f.StringVar(&mode, "mode", "auto", "persistence `mode`: auto, dax, msync or volatile")
	f.BoolVar(&cfg.ReadOnly, "read-only", false, "peers may only read the region")
	dataOff := f.Uint("data-offset", 0, "data_offset in librpma's descriptor: where its example clients put their data (8-aligned)")
	m, limits, tf := f.metrics(), f.limits(), f.tls()
	if err := f.parse(args); err != nil {
		return err
	}
	tlsOpts, err := tf.Options(true)
	if err != nil {
		return f.bad("%v", err)
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if cfg.File == "" {
		return f.bad("--file is required")
	}
	n, err := units.ParseSize(size, 1<<62)
	if err != nil {
		return f.bad("--size: %v", err)
	}
	cfg.Options = tlsOpts
	if cfg.Mode, err = pmemsink.ParseMode(mode); err != nil {
		return f.bad("--mode: %v", err)
	}
	if *dataOff > 1<<16-8 || *dataOff%8 != 0 {
		return f.bad("--data-offset %d: want an 8-aligned offset below 65536", *dataOff)
	}
	cfg.Addr, cfg.Port, cfg.Size, cfg.DataOffset = p.Addr, p.Port, int64(n), uint16(*dataOff)
	if cfg.Port == 0 {
		cfg.Ready = func(a net.Addr) { fmt.Fprintf(std.out, "listening on port %d\n", a.(*net.TCPAddr).Port) }
	}
	srv, err := serveMetrics(m, "sink", std)
	if err != nil {
		return err
	}
	defer srv.Close()
	cfg.Listening = srv.AddListener
	cfg.Opened = func(s *pmemsink.Sink) { srv.AddSink(cfg.File, s) }
	cfg.Options = append(append(cfg.Options, limits.Options()...), connlog.Options(ctx)...)
	return sinkpeer.Serve(ctx, cfg)
}

func runPut(ctx context.Context, args []string, std stdio) error {
	var offset, method string
	cfg := sinkpeer.PutConfig{Err: std.err}
	f := newFlags("put", std, func(w io.Writer) {
		fmt.Fprintln(w, "usage: iwarp-peer put -a ADDR [-p PORT] [--offset N|data] [--method auto|extension|gpspm|read] [--persistent] FILE|-")
		fmt.Fprintln(w, "Writes FILE (- for stdin) into a sink's region at region offset N, flushes it, and reports the method and the time to durable on stderr.")
		fmt.Fprintln(w, "The target may be a librpma server that sends its descriptor as librpma's examples do: auto flushes by read-after-write there; name gpspm for the GPSPM example (09).")
	}, true)
	peerFlags(f, &cfg.PeerConfig, "the sink's `address`")
	f.StringVar(&offset, "offset", "0", "region `offset` of the first byte, or data: the descriptor's data_offset")
	f.StringVar(&method, "method", "auto", "flush `method`: auto, extension, gpspm or read (read-after-write)")
	f.BoolVar(&cfg.Persistent, "persistent", false, "fail unless the target declares the bytes persistent")
	tf := f.tls()
	if err := f.parse(args); err != nil {
		return err
	}
	if err := clientTLS(f, tf, &cfg.PeerConfig); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return f.badUsage("give one FILE, or - for stdin")
	}
	if cfg.PeerConfig.Addr == "" {
		return f.bad("-a is required")
	}
	m, err := pmemsink.ParseMethod(method)
	if err != nil {
		return f.bad("--method: %v", err)
	}
	if offset == "data" {
		cfg.AtDataOffset = true
	} else if cfg.Offset, err = strconv.ParseUint(offset, 0, 64); err != nil {
		return f.bad("--offset: want a number or data, not %q", offset)
	}
	cfg.Method, cfg.Src = m, os.Stdin
	if name := f.Arg(0); name != "-" {
		file, err := os.Open(name)
		if err != nil {
			return err
		}
		defer file.Close()
		cfg.Src = file
	}
	return sinkpeer.Put(ctx, cfg)
}

func runGet(ctx context.Context, args []string, std stdio) error {
	var length string
	cfg := sinkpeer.GetConfig{Out: std.out, Err: std.err}
	f := newFlags("get", std, func(w io.Writer) {
		fmt.Fprintln(w, "usage: iwarp-peer get -a ADDR [-p PORT] --offset N --length L")
		fmt.Fprintln(w, "Writes exactly L bytes of a sink's region from region offset N to stdout, and nothing else.")
	}, true)
	peerFlags(f, &cfg.PeerConfig, "the sink's `address`")
	f.Uint64Var(&cfg.Offset, "offset", 0, "region `offset`")
	f.StringVar(&length, "length", "", "bytes to read (k/m/g suffixes)")
	tf := f.tls()
	if err := f.parse(args); err != nil {
		return err
	}
	if err := clientTLS(f, tf, &cfg.PeerConfig); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if cfg.PeerConfig.Addr == "" || length == "" {
		return f.bad("-a and --length are required")
	}
	n, err := units.ParseSize(length, 1<<62)
	if err != nil {
		return f.bad("--length: %v", err)
	}
	cfg.Length = uint64(n)
	return sinkpeer.Get(ctx, cfg)
}
