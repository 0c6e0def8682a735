//go:build interop

package siw_test

import (
	"fmt"
	"io"
	"net"
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

// TestHostGuestTCP checks both paths a host-side peer will use: the host
// dials a guest listener through the forwarded port, and a guest client
// reaches a host listener on 127.0.0.1 as 10.0.2.2.
func TestHostGuestTCP(t *testing.T) {
	ctx := scenario(t, 2*time.Minute)

	srv := server(t, ctx, "nc-l", "exec nc -l -p 7176", 7176)
	addr, err := vm.HostAddr(7176)
	require.NoError(t, err)
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	_, err = c.Write([]byte("from-the-host\n"))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	res := wait(t, ctx, srv, 30*time.Second)
	require.Equal(t, "from-the-host\n", res.Stdout, "%s", res)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	got := make(chan string, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		b, _ := io.ReadAll(conn)
		got <- string(b)
	}()
	res = run(t, ctx, 30*time.Second, "nc-host", fmt.Sprintf("echo from-the-guest | nc 10.0.2.2 %d", port))
	mustOK(t, res)
	select {
	case s := <-got:
		require.Equal(t, "from-the-guest\n", s)
	case <-ctx.Done():
		t.Fatal("the host listener got nothing")
	}
}
