//go:build interop

package siw_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBoot checks what every other scenario relies on: siw0 on eth0, the
// forwarded ports, and the guest agent answering.
func TestBoot(t *testing.T) {
	ctx := scenario(t, 2*time.Minute)
	res := run(t, ctx, 30*time.Second, "ibv-devices", "uname -r; ibv_devices; rdma link show; ibv_devinfo -d siw0")
	mustOK(t, res)
	require.Contains(t, res.Stdout, "netdev eth0")
	require.Contains(t, res.Stdout, "transport:\t\t\tiWARP")
	require.Regexp(t, `(?m)^\s+siw0\s`, res.Stdout)
	seen := map[int]bool{}
	for _, gp := range []int{7174, 7175, 7176, 18515} {
		hp, err := vm.HostPort(gp)
		require.NoError(t, err)
		require.False(t, seen[hp], "host port %d forwarded twice", hp)
		seen[hp] = true
	}
	_, err := vm.HostPort(1)
	require.Error(t, err)
}
