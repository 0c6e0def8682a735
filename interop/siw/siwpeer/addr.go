package siwpeer

import (
	"fmt"
	"net"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// isHostLoopback reports whether addr names the Docker host's own loopback
// address the way the user wrote it.
func isHostLoopback(addr string) bool { return addr == "127.0.0.1" || addr == "localhost" }

func isOtherLoopback(addr string) bool {
	if addr == "ip6-localhost" || addr == "ip6-loopback" {
		return true
	}
	ip := net.ParseIP(addr)
	return ip != nil && ip.IsLoopback()
}

// guestAddr maps an address on a guest program's command line from the
// host's view to the guest's. A client's 127.0.0.1 is the Docker host, which
// QEMU's user networking reaches at 10.0.2.2; any other address goes through
// QEMU's NAT unchanged. A server can only be reached through the forwarded
// port on the host's 127.0.0.1, so it binds the guest's own address (or
// any).
func guestAddr(addr string, server bool) (string, error) {
	switch {
	case !server && isHostLoopback(addr):
		return lab.HostIP, nil
	case !server && isOtherLoopback(addr):
		return "", fmt.Errorf("address %s: from the guest only 127.0.0.1 of the host is reachable (as %s)", addr, lab.HostIP)
	case !server:
		return addr, nil
	case isHostLoopback(addr):
		return lab.GuestIP, nil
	case addr == "0.0.0.0" || addr == lab.GuestIP:
		return addr, nil
	}
	return "", fmt.Errorf("address %s: a server in the guest is reached through the host's 127.0.0.1 only; "+
		"bind 127.0.0.1 or leave the address out", addr)
}
