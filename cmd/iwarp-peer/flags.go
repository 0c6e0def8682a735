package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/internal/getopt"
)

// flags is a command's flag set. -h prints the command's usage on stdout
// (exit status 0); a mistake is described on stderr (exit status 2).
type flags struct {
	*flag.FlagSet
	std stdio
	// usage prints the command's usage; withDefaults adds the flag
	// package's list of flags and defaults after it.
	usage        func(w io.Writer)
	withDefaults bool
	// checks are the checks of flag groups (f.metrics(), f.limits()),
	// run in turn after parsing.
	checks []func() error
}

func newFlags(name string, std stdio, usage func(io.Writer), withDefaults bool) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), std: std, usage: usage, withDefaults: withDefaults}
	f.SetOutput(std.err)
	f.Usage = func() {} // parse prints it where it belongs
	return f
}

func (f *flags) printUsage(w io.Writer) {
	f.usage(w)
	if f.withDefaults {
		f.SetOutput(w)
		f.PrintDefaults()
		f.SetOutput(f.std.err)
	}
}

// parse parses args; getopt-style clusters of one-letter flags ("-vV",
// "-C10") are expanded first.
func (f *flags) parse(args []string) error {
	err := f.Parse(getopt.Expand(f.FlagSet, args))
	switch {
	case errors.Is(err, flag.ErrHelp):
		f.printUsage(f.std.out)
		return errHelp
	case err != nil: // the flag package has said what is wrong
		f.printUsage(f.std.err)
		return errUsage
	}
	for _, check := range f.checks {
		if err := check(); err != nil {
			return f.bad("%v", err)
		}
	}
	return nil
}

// bad describes a mistake found after parsing.
func (f *flags) bad(format string, a ...any) error {
	fmt.Fprintf(f.std.err, "iwarp-peer %s: "+format+"\n", append([]any{f.Name()}, a...)...)
	fmt.Fprintf(f.std.err, "Run 'iwarp-peer %s -h' for its flags.\n", f.Name())
	return errUsage
}

// badUsage describes a mistake and prints the usage after it.
func (f *flags) badUsage(format string, a ...any) error {
	fmt.Fprintf(f.std.err, "iwarp-peer %s: "+format+"\n", append([]any{f.Name()}, a...)...)
	f.printUsage(f.std.err)
	return errUsage
}

// noArgs refuses arguments that are not flags.
func (f *flags) noArgs() error {
	if f.NArg() > 0 {
		return f.bad("unexpected argument %q", f.Arg(0))
	}
	return nil
}

// given reports whether the flag name was on the command line.
func (f *flags) given(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}
