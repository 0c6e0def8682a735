package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/dissect"
)

func init() {
	register("decode", command{
		summary: "print the iWARP dissection of a pcap or pcapng capture",
		run:     runDecode,
	})
}

// runDecode implements "iwarp-peer decode FILE [--json]".
func runDecode(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON document instead of text")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: iwarp-peer decode FILE [--json]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Decodes the MPA, DDP and RDMAP traffic of every TCP connection in a pcap or")
		fmt.Fprintln(stderr, "pcapng capture (gzip allowed): the MPA setup, then every FPDU with its frames,")
		fmt.Fprintln(stderr, "CRC verdict and headers, in capture order.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	// Flags may come before or after the file name.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return errUsage // flag has printed the mistake and the usage
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 {
		fs.Usage()
		return errUsage
	}
	d, err := dissect.DecodeFile(files[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return d.WriteJSON(stdout)
	}
	return d.WriteText(stdout)
}
