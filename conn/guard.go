package conn

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// Defaults of WithProtectionFailureLimit.
const (
	DefaultProtectionFailures = 16
	DefaultProtectionWindow   = time.Minute
)

// protectionGuard counts, per remote address, the connections that ended
// because the peer touched memory it may not (a Terminate this side sent
// with a protection code: the signature of a peer guessing STags), and
// refuses an address that had too many within the window, for one window.
// Its memory is bounded: an address is forgotten a window after its last
// failure, and at most maxTracked addresses are tracked. Guarded by the
// listener's mutex.
type protectionGuard struct {
	limit  int
	window time.Duration
	addrs  map[netip.Addr]*failures
}

type failures struct {
	times        []time.Time // within the window, oldest first
	blockedUntil time.Time
}

const maxTracked = 4096

func newProtectionGuard(limit int, window time.Duration) *protectionGuard {
	return &protectionGuard{limit: limit, window: window, addrs: make(map[netip.Addr]*failures)}
}

func addrOf(a net.Addr) (netip.Addr, bool) {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, ok := netip.AddrFromSlice(ta.IP)
		return ip.Unmap(), ok
	}
	ap, err := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap(), err == nil
}

// blocked reports whether remote is refused at now.
func (g *protectionGuard) blocked(remote net.Addr, now time.Time) bool {
	if g.limit <= 0 || remote == nil {
		return false
	}
	ip, ok := addrOf(remote)
	if !ok {
		return false
	}
	f := g.addrs[ip]
	return f != nil && now.Before(f.blockedUntil)
}

// note records how a connection from remote ended; it reports whether the
// address is blocked from now on (once, when the limit is crossed).
func (g *protectionGuard) note(remote net.Addr, err error, now time.Time) bool {
	if g.limit <= 0 || remote == nil || !isProtectionFailure(err) {
		return false
	}
	ip, ok := addrOf(remote)
	if !ok {
		return false
	}
	f := g.addrs[ip]
	if f == nil {
		if len(g.addrs) >= maxTracked {
			g.forget(now)
			if len(g.addrs) >= maxTracked {
				return false
			}
		}
		f = &failures{}
		g.addrs[ip] = f
	}
	cut := now.Add(-g.window)
	k := 0
	for k < len(f.times) && f.times[k].Before(cut) {
		k++
	}
	f.times = append(f.times[k:], now)
	if len(f.times) >= g.limit && !now.Before(f.blockedUntil) {
		f.blockedUntil = now.Add(g.window)
		f.times = f.times[:0]
		return true
	}
	return false
}

// forget drops addresses with nothing left in their window.
func (g *protectionGuard) forget(now time.Time) {
	cut := now.Add(-g.window)
	for ip, f := range g.addrs {
		if now.After(f.blockedUntil) && (len(f.times) == 0 || f.times[len(f.times)-1].Before(cut)) {
			delete(g.addrs, ip)
		}
	}
}

// isProtectionFailure reports whether err ended a connection with a
// Terminate this side sent for a protection check: an RDMAP Remote
// Protection error or a DDP Tagged Buffer error.
func isProtectionFailure(err error) bool {
	var te *rdmap.TerminateError
	if !errors.As(err, &te) || te.Remote {
		return false
	}
	c := te.Code
	return c.Layer() == termcode.RDMAP && c.EType() == 1 ||
		c.Layer() == termcode.DDP && c.EType() == 1 && c != termcode.DDPTaggedVersion
}
