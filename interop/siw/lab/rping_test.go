package lab

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func pings(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%sping data: rdma-ping-%d: ABCDEF\n", prefix, i)
	}
	return b.String()
}

// The one failure RpingOK forgives is rdma-core 44's exit race, and only
// after a run that is otherwise whole.
func TestRpingOK(t *testing.T) {
	const race = "client DISCONNECT EVENT...\nrdma_get_cm_event: Bad file descriptor\n"
	for _, c := range []struct {
		name string
		code int
		out  string
		want bool
	}{
		{"clean client", 0, pings("", 3) + "client DISCONNECT EVENT...\n", true},
		{"clean server", 0, pings("server ", 3) + "server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n", true},
		{"a ping short", 0, pings("", 2), false},
		{"exit race after a whole run", 255, pings("", 3) + race, true},
		{"exit race, server", 255, pings("server ", 3) + "server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\nrdma_get_cm_event: Bad file descriptor\n", true},
		{"exit race but a ping short", 255, pings("", 2) + race, false},
		{"exit race without the disconnect", 255, pings("", 3) + "rdma_get_cm_event: Bad file descriptor\n", false},
		{"other status", 1, pings("", 3) + race, false},
		{"status 255 without the race", 255, pings("", 3) + "client DISCONNECT EVENT...\n", false},
		{"a real failure beside the race", 255, pings("", 3) + "data mismatch!\n" + race, false},
		{"left mid-ping", 255, pings("server ", 3) + "server DISCONNECT EVENT...\nwait for RDMA_WRITE_ADV state 10\nrdma_get_cm_event: Bad file descriptor\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, RpingOK(c.code, c.out, 3))
		})
	}
}
