// Package getopt lets a flag.FlagSet read command lines written for
// getopt(3), as rdma-core's and perftest's tools take them: clusters of
// one-letter flags ("-vV") and values attached to their letter ("-C10").
package getopt

import (
	"flag"
	"strings"
)

// Expand rewrites getopt-style clusters of one-letter flags into
// separate arguments for the flag package, so that command lines written
// for rdma-core's tools keep working: "-vV" becomes "-v -V" and "-C10"
// becomes "-C 10". An argument is left alone when it names a flag of fs
// (such as -crc), when its first letter is not a one-letter flag, or after
// "--" or the first non-flag argument.
func Expand(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return append(out, args[i:]...)
		}
		name := strings.TrimLeft(a, "-")
		hasValue := false
		if k := strings.IndexByte(name, '='); k >= 0 {
			name, hasValue = name[:k], true
		}
		if strings.HasPrefix(a, "--") || len(name) < 2 || fs.Lookup(name) != nil || fs.Lookup(name[:1]) == nil {
			out = append(out, a)
			// A flag that takes a value takes the next argument whatever
			// it looks like.
			if f := fs.Lookup(name); f != nil && !hasValue && !isBoolFlag(f) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		parts := splitCluster(fs, a[1:])
		out = append(out, parts...)
		last := parts[len(parts)-1]
		if f := fs.Lookup(strings.TrimPrefix(last, "-")); f != nil && strings.HasPrefix(last, "-") && !isBoolFlag(f) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// splitCluster splits "vVd" or "S64" (getopt's attached argument).
func splitCluster(fs *flag.FlagSet, s string) []string {
	var out []string
	for j := 0; j < len(s); j++ {
		f := fs.Lookup(s[j : j+1])
		if f == nil {
			// Unknown letter: hand it to the flag package, which reports it.
			return append(out, "-"+s[j:])
		}
		out = append(out, "-"+s[j:j+1])
		if !isBoolFlag(f) {
			if j+1 < len(s) {
				out = append(out, s[j+1:])
			}
			return out
		}
	}
	return out
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
