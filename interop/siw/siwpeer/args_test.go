package siwpeer

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFindsRolePortAndAddresses(t *testing.T) {
	cases := []struct {
		cmd    string
		server bool
		port   int
		args   string // after mapping to the guest's view
	}{
		{"rping -s -p 7180 -C 10 -v", true, 7180, "-s -p 7180 -C 10 -v"},
		{"rping -s -C 3", true, 7174, "-s -C 3"},
		{"rping -s -a 127.0.0.1 -p7181", true, 7181, "-s -a 10.0.2.15 -p7181"},
		{"rping -svp 7182", true, 7182, "-svp 7182"},
		{"rping -s -a 0.0.0.0", true, 7174, "-s -a 0.0.0.0"},
		// -S takes a value: 127 is a size, not an address or an option.
		{"rping -c -a 127.0.0.1 -p 7174 -C 3 -S 127", false, 7174, "-c -a 10.0.2.2 -p 7174 -C 3 -S 127"},
		{"rping -c -alocalhost -Vv", false, 7174, "-c -a10.0.2.2 -Vv"},
		{"rping -c -a 192.0.2.7", false, 7174, "-c -a 192.0.2.7"},
		{"iwtest --server --port=7300 --addr=localhost", true, 7300, "--server --port=7300 --addr=10.0.2.15"},
		// --pdata takes a value that only looks like an address.
		{"iwtest -c --addr 127.0.0.1 --pdata 127.0.0.1 -T all", false, 7175, "-c --addr 10.0.2.2 --pdata 127.0.0.1 -T all"},
		{"iwtest -s -w 60", true, 7175, "-s -w 60"},
		{"ib_write_bw -R -s 4096 -n 20 127.0.0.1", false, 18515, "-R -s 4096 -n 20 10.0.2.2"},
		{"ib_write_bw -R --port 19000 -d siw0", true, 19000, "-R --port 19000 -d siw0"},
		{"ib_read_bw -R --port=19001 --size 64", true, 19001, "-R --port=19001 --size 64"},
		{"ib_send_lat --size 64 -R localhost", false, 18515, "--size 64 -R 10.0.2.2"},
		{"ib_write_lat -R -- 127.0.0.1", false, 18515, "-R -- 10.0.2.2"},
		{"ibv_devinfo -d siw0", false, 0, "-d siw0"},
		{"rpmaclient -a 127.0.0.1 -o log -w 127.0.0.1", false, 7204, "-a 10.0.2.2 -o log -w 127.0.0.1"},
		{"rpmaclient -s -a localhost -p 7190 -n 4", true, 7190, "-s -a 10.0.2.15 -p 7190 -n 4"},
		{"rpmaserver -a 127.0.0.1 -e 05 -f /tmp/region --pmem", true, 7204, "-a 10.0.2.15 -e 05 -f /tmp/region --pmem"},
		{"rpmaserver -a localhost -p 7191 -e 09 -f /tmp/r", true, 7191, "-a 10.0.2.15 -p 7191 -e 09 -f /tmp/r"},
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			f := strings.Fields(c.cmd)
			prog, ok := lookup(f[0])
			require.True(t, ok)
			inv, err := prog.parse(f[1:])
			require.NoError(t, err)
			assert.Equal(t, c.server, inv.server, "server")
			assert.Equal(t, c.port, inv.port, "port")
			require.NoError(t, inv.rewriteAddrs(guestAddr))
			assert.Equal(t, c.args, strings.Join(inv.args, " "))
		})
	}
}

func TestParseRejectsWhatCannotBeForwardedOrReached(t *testing.T) {
	for _, c := range []string{
		"rping -s -p 0",     // no fixed port to forward
		"rping -s -p seven", // not a port
		"ib_write_bw -R -p 70000",
	} {
		f := strings.Fields(c)
		prog, _ := lookup(f[0])
		_, err := prog.parse(f[1:])
		require.Error(t, err, c)
	}
	for _, c := range []string{
		"rping -c -a 127.0.0.2",    // the guest reaches the host's 127.0.0.1 only
		"rping -c -a ::1",          // (and no IPv6)
		"rping -s -a 192.0.2.7",    // a server is reached through the host's 127.0.0.1
		"ib_write_bw -R 127.0.1.1", // perftest's positional peer
	} {
		f := strings.Fields(c)
		prog, _ := lookup(f[0])
		inv, err := prog.parse(f[1:])
		require.NoError(t, err, c)
		require.Error(t, inv.rewriteAddrs(guestAddr), c)
	}
}

func TestGuestScriptPassesArgumentsUnchanged(t *testing.T) {
	args := []string{"plain", "two words", `it's`, `"dq"`, "$HOME", "`x`", `back\slash`, "", "*"}
	script := guestScript(Program{Name: "printf"}, &invocation{args: append([]string{`%s|`}, args...)})
	assert.True(t, strings.HasPrefix(script, "exec 'printf' "), script)
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	require.NoError(t, err)
	assert.Equal(t, strings.Join(args, "|")+"|", string(out))
}

func TestClientsPrimeTheNeighbourEntryFirst(t *testing.T) {
	rping, _ := lookup("rping")
	assert.True(t, strings.HasPrefix(guestScript(rping, &invocation{}), primeNeighbour))
	assert.False(t, strings.HasPrefix(guestScript(rping, &invocation{server: true}), "ping"))
	local, _ := lookup("ibv_devinfo")
	assert.Equal(t, "exec 'ibv_devinfo'", guestScript(local, &invocation{}))
}

func TestSiwLinkLine(t *testing.T) {
	out := "link lo/1 state ACTIVE\nlink siw0/1 state ACTIVE physical_state LINK_UP netdev eth0 \nlink siw_ens3/1 state ACTIVE physical_state LINK_UP netdev ens3\n"
	assert.Equal(t, "link siw0/1 state ACTIVE physical_state LINK_UP netdev eth0", siwLinkLine(out, ""))
	assert.Equal(t, "link siw_ens3/1 state ACTIVE physical_state LINK_UP netdev ens3", siwLinkLine(out, "ens3"))
	assert.Empty(t, siwLinkLine(out, "eth1"))
	assert.Empty(t, siwLinkLine("link mlx5_0/1 state ACTIVE netdev eth0\n", ""))
}

func TestDefaultRouteIn(t *testing.T) {
	table := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n" +
		"ens3\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
	dev, err := defaultRouteIn(strings.NewReader(table))
	require.NoError(t, err)
	assert.Equal(t, "ens3", dev)
	_, err = defaultRouteIn(strings.NewReader(table[:strings.Index(table, "ens3")]))
	require.Error(t, err)
}

func TestSignalStatus(t *testing.T) {
	assert.Equal(t, 143, signalStatus("terminated"))
	assert.Equal(t, 137, signalStatus("killed"))
	assert.Equal(t, 130, signalStatus("interrupt"))
}

func TestRelayedSignals(t *testing.T) {
	assert.Equal(t, syscall.SIGINT, relayed(syscall.SIGINT, 1))
	assert.Equal(t, syscall.SIGKILL, relayed(syscall.SIGINT, 2), "a second signal kills")
	assert.Equal(t, syscall.SIGKILL, relayed(os.Interrupt, 3))
}
