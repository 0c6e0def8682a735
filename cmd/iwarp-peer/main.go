// Command iwarp-peer is an iWARP endpoint built on iwarp-go: a demo over
// loopback, an rping-compatible client and server, a benchmark, and a
// capture decoder.
//
//	iwarp-peer demo [--pcap FILE]
//	iwarp-peer rping -s|-c [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V] ...
//	iwarp-peer bench -s|-c ... | --loopback --compare-tcp ...
//	iwarp-peer decode FILE.pcap [--json]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand. run gets the arguments after the
// subcommand's name and writes its normal output to stdout.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

// commands holds the subcommands; each file registers its own in init.
var commands = map[string]command{}

func register(name string, c command) {
	if _, dup := commands[name]; dup {
		panic("iwarp-peer: subcommand registered twice: " + name)
	}
	commands[name] = c
}

// errUsage reports a command-line mistake; the message has been printed.
var errUsage = errors.New("usage")

// reportedError is a failure the subcommand has already described on
// stderr in its own words (rping's messages, say); run adds nothing.
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
	fmt.Fprintln(w, "usage: iwarp-peer <command> [arguments]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'iwarp-peer <command> -h' for a command's flags.")
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "iwarp-peer: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := c.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
			return 2
		}
		if errors.As(err, new(reportedError)) {
			return 1
		}
		fmt.Fprintf(stderr, "iwarp-peer %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
