package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/iwarp-go/iwarp-go/internal/connflags"
	"github.com/iwarp-go/iwarp-go/internal/connlog"
	"github.com/iwarp-go/iwarp-go/internal/metricshttp"
	"github.com/iwarp-go/iwarp-go/internal/rping"
)

func rpingUsage(w io.Writer) {
	fmt.Fprintf(w, `usage: iwarp-peer rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port] [-P] [--srq n]
       iwarp-peer rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]
	-c		client side
	-I addr		source address to bind to for the client (default any)
	-s		server side.  To bind to any address with IPv6 use -a ::0
	-v		display ping data to stdout
	-V		validate ping data
	-d		debug printfs
	-S size 	ping data size (default %d; %d to %d)
	-C count	ping count times (default 0: until interrupted, or until the server leaves)
	-a addr		address (server default: every address)
	-p port		port (default %d; a server's 0 picks a free one and prints it)
	-P		persistent server mode allowing multiple connections
	-q		accepted and ignored (the queue pair is always the program's own)
	--srq n		server: every connection takes its receives from one shared
			receive queue of n receives (at most n clients mid-ping at once)
interop options:
	--crc off|preferred|required	MPA CRC (default off: like siw, a server follows the client)
	--mpa-rev 1|2			MPA revision (client: sent; server: the only one accepted; default 2)
	--no-enhanced			revision 2 without the RFC 6581 Enhanced flag
	--p2p none|write|read|send	RTR types offered (client, default none) or accepted (server, default all)
`, rping.DefaultSize, rping.MinSize, rping.MaxSize, rping.Port)
	fmt.Fprint(w, metricsUsage)
	fmt.Fprint(w, limitsUsage)
}

// rpingArgs is rping's command line.
type rpingArgs struct {
	cfg            *rping.Config
	server, client bool
	mpa            connflags.MPA
	metrics        *metricshttp.Flags
	limits         *connflags.Limits
}

// parseRping reads rping's command line: the one-letter flags and their
// meanings are rping's; the long ones select MPA variants for interop
// tests.
func parseRping(args []string, std stdio) (*rpingArgs, error) {
	a := &rpingArgs{cfg: &rping.Config{Out: std.out, Err: std.err}}
	cfg, m := a.cfg, &a.mpa
	server, client := &a.server, &a.client
	f := newFlags("rping", std, rpingUsage, false)
	f.BoolVar(server, "s", false, "")
	f.BoolVar(client, "c", false, "")
	f.StringVar(&cfg.Addr, "a", "", "")
	f.StringVar(&cfg.Src, "I", "", "")
	f.IntVar(&cfg.Port, "p", rping.Port, "")
	f.IntVar(&cfg.Count, "C", 0, "")
	f.IntVar(&cfg.Size, "S", rping.DefaultSize, "")
	f.BoolVar(&cfg.Persistent, "P", false, "")
	f.IntVar(&cfg.SRQ, "srq", 0, "")
	f.BoolVar(&cfg.Verbose, "v", false, "")
	f.BoolVar(&cfg.Validate, "V", false, "")
	f.BoolVar(&cfg.Debug, "d", false, "")
	f.Bool("q", false, "")
	m.Register(f.FlagSet)
	a.metrics = f.metrics()
	a.limits = f.limits()
	if err := f.parse(args); err != nil {
		return nil, err
	}
	var err error
	switch {
	case f.NArg() > 0:
		return nil, f.badUsage("unexpected argument %q", f.Arg(0))
	case a.server == a.client:
		return nil, f.badUsage("give -s or -c")
	case a.client && cfg.Addr == "":
		return nil, f.bad("the client needs -a addr")
	case a.server && cfg.Src != "":
		return nil, f.bad("-I applies to the client only")
	case a.client && cfg.Persistent:
		return nil, f.bad("-P applies to the server only")
	case a.client && cfg.SRQ != 0:
		return nil, f.bad("--srq applies to the server only")
	}
	if err := cfg.Check(); err != nil {
		return nil, f.bad("%v", err)
	}
	if cfg.Options, err = m.Options(); err != nil {
		return nil, f.bad("%v", err)
	}
	if a.server {
		cfg.Rev = m.Rev
		cfg.Options = append(cfg.Options, a.limits.Options()...)
	}
	return a, nil
}

func runRping(ctx context.Context, args []string, std stdio) error {
	a, err := parseRping(args, std)
	if err != nil {
		return err
	}
	srv, err := serveMetrics(a.metrics, "rping", std)
	if err != nil {
		return err
	}
	defer srv.Close()
	cfg := a.cfg
	cfg.Listening = srv.AddListener
	cfg.Options = append(cfg.Options, connlog.Options(ctx)...)
	if a.client {
		return reported(rping.Client(ctx, cfg))
	}
	if cfg.Port == 0 {
		cfg.Ready = func(a net.Addr) { fmt.Fprintf(std.out, "listening on port %d\n", a.(*net.TCPAddr).Port) }
	}
	if err := rping.Serve(ctx, cfg); err != nil {
		return reported(err)
	}
	return stopped(ctx, "rping", std)
}
