package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/iwarp-go/iwarp-go/dissect"
)

func decodeUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: iwarp-peer decode FILE [--json] [--tshark]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Decodes the MPA, DDP and RDMAP traffic of every TCP connection in a pcap or")
	fmt.Fprintln(w, "pcapng capture (gzip allowed): the MPA setup, then every FPDU with its frames,")
	fmt.Fprintln(w, "CRC verdict and headers, in capture order. A capture cut short (tcpdump killed")
	fmt.Fprintln(w, "while writing) is decoded up to the record it ends in, and the output says where.")
	fmt.Fprintln(w)
}

// runDecode implements "iwarp-peer decode FILE [--json] [--tshark]".
func runDecode(_ context.Context, args []string, std stdio) error {
	f := newFlags("decode", std, decodeUsage, true)
	asJSON := f.Bool("json", false, "print one JSON document instead of text")
	tshark := f.Bool("tshark", false, "print the tshark command that dissects FILE the same way (RPC-over-RDMA heuristic off), instead of decoding it")
	// Flags may come before or after the file name.
	var files []string
	for {
		if err := f.parse(args); err != nil {
			return err
		}
		if f.NArg() == 0 {
			break
		}
		files = append(files, f.Arg(0))
		args = f.Args()[1:]
	}
	if len(files) != 1 {
		return f.badUsage("give one capture file")
	}
	if *tshark {
		words := dissect.TsharkCommand(files[0])
		for i, w := range words {
			words[i] = shellQuote(w)
		}
		fmt.Fprintln(std.out, strings.Join(words, " "))
		return nil
	}
	d, err := dissect.DecodeFile(files[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return d.WriteJSON(std.out)
	}
	return d.WriteText(std.out)
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and -_./:=,+@%.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
