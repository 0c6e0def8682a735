package lab

import (
	"regexp"
	"strings"
)

// PingLine matches one ping that rdma-core's rping printed with -v: the
// client's "ping data: …", the server's "server ping data: …".
var PingLine = regexp.MustCompile(`(?m)^(server )?ping data: rdma-ping-\d+: `)

// rpingExitRace is what rdma-core 44's rping (Debian's, which the guest
// runs) may print as it exits after a run that succeeded: its CM thread,
// having handled the last event, asks for the next one on the event
// channel that main has just destroyed, and exits with status 255.
// rdma-core fixed it in 2025 (linux-rdma/rdma-core pull request 1622,
// "rping: Fix spurious failure return codes"), stopping the thread through
// an eventfd before the channel goes.
const rpingExitRace = "rdma_get_cm_event: Bad file descriptor"

// RpingOK reports whether an rping that exited with code and printed out
// (stdout and stderr together) ran all its pings and ended cleanly. A run
// counts as clean despite the exit status 255 of rpingExitRace only when
// that line is its one complaint, after all its pings and the disconnect
// that ends an rping run: lines other than pings may then be only the
// DISCONNECT event and the server's "wait for RDMA_READ_ADV state 10"
// (DISCONNECTED where the next ping would start), which rping prints on
// every normal end.
func RpingOK(code int, out string, pings int) bool {
	if len(PingLine.FindAllString(out, -1)) != pings {
		return false
	}
	if code == 0 {
		return true
	}
	if code != 255 {
		return false
	}
	raced, disconnected := false, false
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || PingLine.MatchString(l):
		case l == rpingExitRace:
			raced = true
		case l == "client DISCONNECT EVENT..." || l == "server DISCONNECT EVENT...":
			disconnected = true
		case l == "wait for RDMA_READ_ADV state 10": // a server's loop, at its top
		default:
			return false
		}
	}
	return raced && disconnected
}
