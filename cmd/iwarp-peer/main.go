// Command iwarp-peer is an iWARP endpoint built on iwarp-go. Its commands:
//
//	bench     bandwidth and latency between two iwarp-go peers, beside raw Go TCP
//	decode    print the iWARP dissection of a pcap or pcapng capture
//	demo      client and server over loopback: Send/Receive, RDMA Write and Read, a durable write, every byte verified
//	get       read bytes of a sink's region to stdout
//	iwtest    the iwtest RDMA test peer (interop/siw/cprog/PROTOCOL.md), client or server
//	mpa-demo  walk through MPA connection setup and FPDU framing over loopback TCP
//	perftest  perftest's ib_*_bw/ib_*_lat over rdma_cm (-R), client or server
//	put       write a file into a sink's region and make it durable
//	rping     rping-compatible client and server (rdma-core's rping over siw)
//	sink      serve a file as remote persistent memory (iwarp-go and librpma initiators)
//	stat      a live table of the queue pairs of an iwarp-peer running with --metrics
//
// "iwarp-peer COMMAND -h" prints a command's flags; "iwarp-peer -d COMMAND"
// traces every connection (setup, Terminates, teardown) on stderr. This package holds the
// command lines and their output; the protocols are importable packages
// (internal/rping, internal/iwtest, internal/bench, internal/demo,
// internal/sinkpeer, package dissect). A command is one entry in the commands table and one file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/iwarp-go/iwarp-go/internal/connlog"
	"github.com/iwarp-go/iwarp-go/internal/interrupt"
)

// command is one subcommand. run gets the arguments after the command's
// name; ctx ends when the process is interrupted (SIGINT or SIGTERM), with
// the signal as its cause.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, std stdio) error
}

// commands is the table of subcommands, in the order -h lists them.
var commands = []command{
	{"bench", "bandwidth and latency between two iwarp-go peers, beside raw Go TCP", runBench},
	{"decode", "print the iWARP dissection of a pcap or pcapng capture", runDecode},
	{"demo", "client and server over loopback: Send/Receive, RDMA Write and Read, a durable write, every byte verified", runDemo},
	{"get", "read bytes of a sink's region to stdout", runGet},
	{"iwtest", "the iwtest RDMA test peer (interop/siw/cprog/PROTOCOL.md), client or server", runIwtest},
	{"mpa-demo", "walk through MPA connection setup and FPDU framing over loopback TCP", runMPADemo},
	{"perftest", "perftest's ib_*_bw/ib_*_lat over rdma_cm (-R), client or server", runPerftest},
	{"put", "write a file into a sink's region and make it durable", runPut},
	{"rping", "rping-compatible client and server (rdma-core's rping over siw)", runRping},
	{"sink", "serve a file as remote persistent memory (iwarp-go and librpma initiators)", runSink},
	{"stat", "a live table of the queue pairs of an iwarp-peer running with --metrics", runStat},
}

// stdio is where a command writes: its results on out, diagnostics on err.
type stdio struct{ out, err io.Writer }

var (
	// errHelp: -h; the usage has been printed on stdout (exit 0).
	errHelp = errors.New("help")
	// errUsage: a command-line mistake, described on stderr (exit 2).
	errUsage = errors.New("usage")
)

// reportedError is a failure the command has already described on stderr
// in its own words (rping's messages, say); run adds nothing.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

// reported marks err as already described; nil stays nil.
func reported(err error) error {
	if err == nil {
		return nil
	}
	return reportedError{err}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: iwarp-peer [-d] <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "  -d        trace connections on stderr: setup, Terminates, teardown (log/slog)")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'iwarp-peer <command> -h' for a command's flags.")
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, std stdio) int {
	trace := len(args) > 0 && args[0] == "-d"
	if trace {
		args = args[1:]
	}
	std.err = shared(std.err)
	ctx = connlog.With(ctx, std.err, trace)
	if len(args) == 0 {
		usage(std.err)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) == 1 {
			usage(std.out)
			return 0
		}
		args = []string{args[1], "-h"} // "help rping" is "rping -h"
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(std.err, "iwarp-peer: unknown command %q\n\n", args[0])
		usage(std.err)
		return 2
	}
	err := c.run(ctx, args[1:], std)
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, new(reportedError)):
		return 1
	}
	fmt.Fprintf(std.err, "iwarp-peer %s: %v\n", c.name, err)
	return 1
}

// stopped ends the run of a server that returned cleanly: if a signal
// stopped it, it says so in one line.
func stopped(ctx context.Context, name string, std stdio) error {
	if cause := context.Cause(ctx); cause != nil {
		fmt.Fprintf(std.err, "iwarp-peer %s: server stopped (%v)\n", name, cause)
	}
	return nil
}

func main() {
	ctx, stop := interrupt.Context()
	code := run(ctx, os.Args[1:], stdio{os.Stdout, os.Stderr})
	stop()
	os.Exit(code)
}
