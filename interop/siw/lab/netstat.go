package lab

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// tcpListenState is the st column value of a listening socket in
// /proc/net/tcp and /proc/net/tcp6 (TCP_LISTEN = 10).
const tcpListenState = "0A"

// listeningIn reports whether a /proc/net/tcp-format table lists a socket in
// LISTEN state whose local port is port. Kernel sockets (siw's rdma_cm
// listeners) appear there just like user sockets.
func listeningIn(r io.Reader, port int) bool {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	first := true
	for sc.Scan() {
		if first { // header line
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpListenState {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		p, err := strconv.ParseUint(f[1][i+1:], 16, 16)
		if err == nil && int(p) == port {
			return true
		}
	}
	return false
}

// procNetFiles are the tables a listener can show up in.
var procNetFiles = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// Listening reports whether any TCP socket of this network namespace
// listens on port, by /proc/net/tcp and /proc/net/tcp6: the agent's check,
// for programs that run beside the caller rather than in a guest.
func Listening(port int) bool { return isListening(port) }

// isListening reports whether any TCP socket of this network namespace
// listens on port.
func isListening(port int) bool {
	for _, name := range procNetFiles {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		ok := listeningIn(f, port)
		f.Close()
		if ok {
			return true
		}
	}
	return false
}
