package siwpeer

import (
	"fmt"
	"strconv"
	"strings"
)

// argStyle describes a program's getopt_long command line well enough to
// find its role, its port and the address it binds or connects to, without
// understanding the rest: it must only know which options take a value, so
// that a value is never mistaken for an option or a positional argument.
type argStyle struct {
	short    string            // getopt optstring: a letter followed by ':' takes a value
	longArgs map[string]bool   // long options that take a value
	alias    map[string]string // long option → the short one it is
	server   string            // the option that makes a server; "" with positionalPeer
	addr     string            // the address option (a client's peer, a server's bind address)
	port     string            // the port option
	// positionalPeer: perftest's style, where a client names its server as
	// the one positional argument and a server has none.
	positionalPeer bool
	// alwaysServer: a program that is only ever a server (rpmaserver).
	alwaysServer bool
}

func rdmaCoreStyle(short string) *argStyle {
	return &argStyle{short: short, server: "s", addr: "a", port: "p"}
}

// serverStyle is rdmaCoreStyle for a program that has no client role.
func serverStyle(short string) *argStyle {
	return &argStyle{short: short, addr: "a", port: "p", alwaysServer: true}
}

// iwtestStyle is interop/siw/cprog/iwtest.c's getopt_long table.
var iwtestStyle = &argStyle{
	short: "sca:p:T:S:n:D:g:t:w:P:vh",
	longArgs: set("addr", "port", "tests", "sizes", "iters", "dirs", "sges", "timeout", "wait", "ird", "ord",
		"pdata", "provoke", "print-pattern"),
	alias:  map[string]string{"server": "s", "client": "c", "addr": "a", "port": "p"},
	server: "s", addr: "a", port: "p",
}

// perftestStyle is perftest 4.5's (Debian 12: 4.5-0.17) command line: its
// optstring and the long options that take a value.
var perftestStyle = &argStyle{
	short: "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP",
	longArgs: set("port", "ib-dev", "ib-port", "mtu", "size", "iters", "tx-depth", "qp-timeout", "sl",
		"gid-index", "connection", "qp", "vector", "inline_size", "outs", "tos", "hop_limit", "MGID",
		"rx-depth", "cq-mod", "atomic_type", "post_list", "duration", "margin", "source_mac", "dest_mac",
		"dest_ip", "source_ip", "dest_port", "source_port", "ethertype", "limit_bw", "limit_msgrate",
		"report-counters", "force-link", "remote_mac", "local_mac", "remote_ip", "local_ip", "remote_port",
		"local_port", "pkey_index", "inline_recv", "burst_size", "typical_pkt_size", "rate_limit",
		"rate_limit_type", "rate_units", "output", "out_json_file", "latency_gap", "flow_label",
		"retry_count", "use_cuda", "use_cuda_bus_id", "use_rocm", "mmap", "mmap-offset", "dlid", "tclass",
		"wait_destroy", "flows", "flows_burst", "reply_every", "vlan_pcp", "recv_post_list",
		"log_dci_streams", "log_active_dci_streams"),
	alias:          map[string]string{"port": "p"},
	port:           "p",
	positionalPeer: true,
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// option is one option found on a command line. Its value, if any, is
// args[arg][off:].
type option struct {
	name     string // short letter, or the long name (its alias if it has one)
	hasValue bool
	arg, off int
}

func (s *argStyle) takesValue(c byte) bool {
	i := strings.IndexByte(s.short, c)
	return c != ':' && i >= 0 && i+1 < len(s.short) && s.short[i+1] == ':'
}

// scan splits args as getopt_long does (options may follow positional
// arguments; "--" ends the options) into options and positional arguments
// (indexes into args).
func (s *argStyle) scan(args []string) (opts []option, positional []int) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			for j := i + 1; j < len(args); j++ {
				positional = append(positional, j)
			}
			return opts, positional
		case strings.HasPrefix(a, "--"):
			name, _, eq := strings.Cut(a[2:], "=")
			o := option{name: name}
			if short, ok := s.alias[name]; ok {
				o.name = short
			}
			switch {
			case eq:
				o.hasValue, o.arg, o.off = true, i, 3+len(name)
			case s.longArgs[name] && i+1 < len(args):
				i++
				o.hasValue, o.arg = true, i
			}
			opts = append(opts, o)
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				o := option{name: a[j : j+1]}
				if s.takesValue(a[j]) {
					if j+1 < len(a) {
						o.hasValue, o.arg, o.off = true, i, j+1
					} else if i+1 < len(args) {
						i++
						o.hasValue, o.arg = true, i
					}
					opts = append(opts, o)
					break
				}
				opts = append(opts, o)
			}
		default:
			positional = append(positional, i)
		}
	}
	return opts, positional
}

// invocation is what the entry point needs to know about one run of a
// program: its role, the port a server listens on, and where in its
// arguments the address is, to rewrite it.
type invocation struct {
	args    []string
	server  bool
	port    int
	addrRef []option // every place an address (bind or peer) is given
}

// parse reads the role, port and addresses from a program's arguments; a
// program without a style is a local one (neither server nor client).
func (p Program) parse(args []string) (*invocation, error) {
	inv := &invocation{args: append([]string{}, args...), port: p.Port}
	s := p.Args
	if s == nil {
		return inv, nil
	}
	opts, positional := s.scan(args)
	inv.server = s.alwaysServer
	portArg := ""
	for _, o := range opts {
		switch {
		case o.name == s.server && s.server != "":
			inv.server = true
		case o.name == s.addr && o.hasValue:
			inv.addrRef = append(inv.addrRef, o)
		case o.name == s.port && o.hasValue:
			portArg = args[o.arg][o.off:]
		}
	}
	if s.positionalPeer {
		inv.server = len(positional) == 0
		for _, i := range positional {
			inv.addrRef = append(inv.addrRef, option{arg: i})
		}
	}
	if portArg != "" {
		n, err := strconv.Atoi(portArg)
		if err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("%s: port %q is not a port number", p.Name, portArg)
		}
		inv.port = n
	}
	if inv.server && inv.port == 0 {
		return nil, fmt.Errorf("%s: a server in the guest needs a fixed port to forward (-p PORT, not 0)", p.Name)
	}
	return inv, nil
}

// rewriteAddrs replaces every address with what mapAddr makes of it.
func (inv *invocation) rewriteAddrs(mapAddr func(addr string, server bool) (string, error)) error {
	for _, r := range inv.addrRef {
		a := inv.args[r.arg]
		m, err := mapAddr(a[r.off:], inv.server)
		if err != nil {
			return err
		}
		inv.args[r.arg] = a[:r.off] + m
	}
	return nil
}
