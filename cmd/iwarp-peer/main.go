// Command iwarp-peer is the iwarp-go endpoint. Each job is a subcommand:
//
//	iwarp-peer demo    MPA setup and FPDU exchange over loopback, explained
//
// Later subcommands (rping, bench, decode) are added to the commands table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

// command is one subcommand. run gets the arguments after the subcommand
// name and writes its account to out.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, out io.Writer) error
}

var commands = []command{
	{"demo", "negotiate MPA and exchange FPDUs over loopback TCP, printing what happens", runDemo},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit code: 0 on
// success, 1 when the subcommand fails, 2 for usage errors.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		err := c.run(ctx, args[1:], stdout)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		default:
			fmt.Fprintf(stderr, "iwarp-peer %s: %v\n", name, err)
			if errors.As(err, new(usageError)) {
				return 2
			}
			return 1
		}
	}
	fmt.Fprintf(stderr, "iwarp-peer: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

// usageError marks bad arguments to a subcommand.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: iwarp-peer <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}
