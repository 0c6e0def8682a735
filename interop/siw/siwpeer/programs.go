package siwpeer

import (
	"fmt"
	"io"
	"strings"
)

// Program is a guest program the image runs by name.
type Program struct {
	Name    string    // the command on the docker run line, and the guest executable
	Port    int       // the port it listens on or connects to by default
	Args    *argStyle // where its command line names role, port and peer; nil: neither
	Summary string
}

// programs is what the image offers besides "shell". A guest program that
// interop/siw/build.sh puts into the initramfs becomes a command with one
// line here.
var programs = []Program{
	{"rping", 7174, rdmaCoreStyle("a:I:Pp:C:S:t:scvVdq"), "rdma-core's rping: -s server, -c -a ADDR client"},
	{"iwtest", 7175, iwtestStyle, "the interop suite's RDMA operation tests (-s, or -c -a ADDR)"},
	{"ib_write_bw", 18515, perftestStyle, "perftest RDMA Write bandwidth (use -R; client: ib_write_bw -R ADDR)"},
	{"ib_write_lat", 18515, perftestStyle, "perftest RDMA Write latency"},
	{"ib_read_bw", 18515, perftestStyle, "perftest RDMA Read bandwidth"},
	{"ib_read_lat", 18515, perftestStyle, "perftest RDMA Read latency"},
	{"ib_send_bw", 18515, perftestStyle, "perftest Send bandwidth"},
	{"ib_send_lat", 18515, perftestStyle, "perftest Send latency"},
	{"ibv_devinfo", 0, nil, "the siw device as libibverbs sees it"},
	{"ibv_devices", 0, nil, "the RDMA devices"},
	{"rpmaclient", 7204, rdmaCoreStyle("sa:p:o:d:x:w:f:t:n:vh"), "librpma 1.2's example clients replayed (-a ADDR -o SEQ; -s: librpma server)"},
	{"rpmaserver", 7204, serverStyle("a:p:e:f:t:vh"), "librpma 1.2's example servers replayed (-a ADDR -e 04|05|07|09 -f FILE), one connection"},
}

// shellCommand is the command that gives an interactive guest.
const shellCommand = "shell"

func lookup(name string) (Program, bool) {
	for _, p := range programs {
		if p.Name == name {
			return p, true
		}
	}
	return Program{}, false
}

func commandNames() string {
	names := make([]string, 0, len(programs)+1)
	for _, p := range programs {
		names = append(names, p.Name)
	}
	return strings.Join(append(names, shellCommand), ", ")
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: docker run --rm --network host [-it] iwarp-go/siw-peer [OPTIONS] COMMAND [ARGS...]

A Linux soft-iWARP (siw) peer: the Debian 6.1 kernel with siw under QEMU, or
the host's siw with --host-siw. ARGS go to the guest program unchanged, except
that an address meaning the Docker host (127.0.0.1, localhost) is rewritten
into the one the guest reaches it by. A server's port is forwarded from the
host's 127.0.0.1, and "READY COMMAND 127.0.0.1:PORT" on stdout says it
listens. The exit status is the program's.

Commands:
`)
	for _, p := range programs {
		fmt.Fprintf(w, "  %-13s %s\n", p.Name, p.Summary)
	}
	fmt.Fprintf(w, "  %-13s %s\n", shellCommand, "a root shell in the guest (docker run -it)")
	fmt.Fprint(w, `
Options:
  --siw NAME=VALUE      load the knobs build of siw.ko with this module
                        parameter (repeatable): mpa_crc_required,
                        mpa_crc_strict, peer_to_peer, mpa_version, try_gso,
                        siw_tcp_nagle
  --memory MB           guest memory (default 1024)
  --cpus N              guest CPUs (default 1; each takes a host core)
  --boot-timeout D      per boot attempt (default 3m)
  --listen-timeout D    a server's wait for its listening socket (default 1m)
  --timeout D           end the program after D (exit status 124); default none
  --share DIR           shell: the host folder mounted at /mnt (default a
                        temporary one)
  --host-siw            use the host kernel's siw (docker run --privileged)
  --netdev NAME         --host-siw: the interface for siw (default: the one
                        with the default route)
  -v, --verbose         QEMU command line and boot progress on stderr

Exit status: the program's (128+N if signal N ended it); 2 usage; 69 a port
the server needs is in use on the host; 70 the guest did not boot or died;
124 --timeout.
`)
}
