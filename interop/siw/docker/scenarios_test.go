//go:build interopdocker

package docker_test

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// The container's boot takes 10–30 s under TCG on a loaded machine; a
// scenario's budget allows for several.
const (
	bootWait = 3 * time.Minute
	runWait  = 4 * time.Minute
)

var (
	pingLine = lab.PingLine
	siwLink  = regexp.MustCompile(`(?m)^siw-peer: link siw0/1 state ACTIVE physical_state LINK_UP netdev eth0$`)
	kernel   = regexp.MustCompile(`(?m)^siw-peer: guest kernel 6\.1\.\S+-amd64 `)
)

// requireSiwLink checks the container's report of its guest: the Debian
// kernel and the siw link on eth0.
func requireSiwLink(t *testing.T, c *proc) {
	t.Helper()
	require.Regexp(t, siwLink, c.stderr.String(), "%s", c)
	require.Regexp(t, kernel, c.stderr.String(), "%s", c)
}

// ready waits for a containerised server's READY line.
func ready(t *testing.T, c *proc, cmd string, port int) {
	t.Helper()
	c.waitStdout(t, bootWait, fmt.Sprintf("READY %s 127.0.0.1:%d\n", cmd, port))
}

func requirePings(t *testing.T, count int, ps ...*proc) {
	t.Helper()
	for _, p := range ps {
		assert.Len(t, pingLine.FindAllString(p.stdout.String(), -1), count, "pings of %s", p)
	}
}

// requireRpingOK waits for the container c running rdma-core's rping and
// judges it by lab.RpingOK, siw-peer's own "siw-peer: " lines set aside:
// rdma-core 44's exit race after a whole run is not a failure (the log
// says when it came).
func requireRpingOK(t *testing.T, timeout time.Duration, pings int, c *proc, others ...*proc) {
	t.Helper()
	all := append([]*proc{c}, others...)
	code := c.wait(t, timeout, others...)
	var out strings.Builder
	for _, l := range strings.SplitAfter(c.stdout.String()+c.stderr.String(), "\n") {
		if !strings.HasPrefix(l, "siw-peer: ") {
			out.WriteString(l)
		}
	}
	require.True(t, lab.RpingOK(code, out.String(), pings), "exit %d%s", code, describe(all))
	if code != 0 {
		t.Logf("%s exited %d after a whole run: rdma-core 44's exit race, not a failure", c.name, code)
	}
}

// TestDockerRping: rdma-core's rping over siw in the container against
// iwarp-peer rping on the host, both ways, 10 verified iterations.
func TestDockerRping(t *testing.T) {
	const n = "10"
	t.Run("siw-server", func(t *testing.T) {
		port := freePort(t)
		p := strconv.Itoa(port)
		c := container(t, "rping-s", "rping", "-s", "-p", p, "-C", n, "-v")
		ready(t, c, "rping", port)
		g := peer(t, "iwarp-peer rping -c", "rping", "-c", "-a", "127.0.0.1", "-p", p, "-C", n, "-v", "-V")
		requireOK(t, runWait, g)
		requireRpingOK(t, runWait, 10, c, g)
		requirePings(t, 10, g, c)
		requireSiwLink(t, c)
	})
	t.Run("siw-client", func(t *testing.T) {
		p := strconv.Itoa(freePort(t))
		// -d: iwarp-peer says "rdma_listen" once it listens.
		g := peer(t, "iwarp-peer rping -s", "rping", "-s", "-a", "127.0.0.1", "-p", p, "-C", n, "-v", "-d")
		g.waitStdout(t, 30*time.Second, "rdma_listen")
		c := container(t, "rping-c", "rping", "-c", "-a", "127.0.0.1", "-p", p, "-C", n, "-v", "-V")
		requireRpingOK(t, bootWait+runWait, 10, c, g)
		requireOK(t, runWait, g)
		requirePings(t, 10, g, c)
		requireSiwLink(t, c)
	})
}

var allTests = []string{"write", "read", "send", "send_se", "send_inv", "send_sge", "write_sge"}

// established is the ESTABLISHED line of iwarp-peer iwtest.
func established(t *testing.T, p *proc) map[string]string {
	t.Helper()
	e := conntest.Lines(p.stdout.String(), "ESTABLISHED")
	require.Len(t, e, 1, "%s", p)
	return e[0]
}

// goServer starts iwarp-peer iwtest -s on a free port of 127.0.0.1 and
// returns it with the port it listens on.
func goServer(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	g := peer(t, "iwarp-peer iwtest -s", append([]string{"iwtest", "-s", "-a", "127.0.0.1", "-p", "0", "-w", "300"}, args...)...)
	out := g.waitStdout(t, 30*time.Second, "LISTENING")
	rows := conntest.Lines(out, "LISTENING")
	require.NotEmpty(t, rows, out)
	return g, rows[0]["port"]
}

// TestDockerIwtest: the C test program over siw in the container against
// iwarp-peer iwtest on the host, each as client and as server: every
// operation, both directions, 1 B to 1 MiB.
func TestDockerIwtest(t *testing.T) {
	sizes := []string{"1", "4096", "65535", "1048576"}
	t.Run("siw-server", func(t *testing.T) {
		port := freePort(t)
		c := container(t, "iwtest-s", "iwtest", "-s", "-p", strconv.Itoa(port), "-w", "120")
		ready(t, c, "iwtest", port)
		g := peer(t, "iwarp-peer iwtest -c", "iwtest", "-c", "-a", "127.0.0.1", "-p", strconv.Itoa(port),
			"-T", "all", "-S", strings.Join(sizes, ","))
		requireOK(t, runWait, g, c)
		conntest.RequireAllOK(t, g.stdout.String(), allTests, sizes)
		conntest.RequireAllOK(t, c.stdout.String(), allTests, sizes)
		requireSiwLink(t, c)
	})
	t.Run("siw-client", func(t *testing.T) {
		// CRC off on the Go side: stock siw does not ask for it either
		// (TestDockerSiwKnob turns that around).
		g, port := goServer(t, "--crc", "off", "-S", "1m")
		c := container(t, "iwtest-c", "iwtest", "-c", "-a", "127.0.0.1", "-p", port, "-T", "all", "-S", strings.Join(sizes, ","))
		requireOK(t, bootWait+runWait, c, g)
		conntest.RequireAllOK(t, g.stdout.String(), allTests, sizes)
		conntest.RequireAllOK(t, c.stdout.String(), allTests, sizes)
		assert.Equal(t, "off", established(t, g)["crc"])
		requireSiwLink(t, c)
	})
}

// TestDockerSiwKnob: an MPA variant through a module parameter of the
// knobs build. With --siw mpa_crc_required=1 the siw initiator asks for
// CRC, and the Go responder, which would not have used CRC by itself
// (--crc off), follows.
func TestDockerSiwKnob(t *testing.T) {
	g, port := goServer(t, "--crc", "off", "-S", "64k")
	c := container(t, "iwtest-c-crc", "--siw", "mpa_crc_required=1", "iwtest", "-c", "-a", "127.0.0.1", "-p", port,
		"-T", "write,read,send", "-S", "4096,65536")
	requireOK(t, bootWait+runWait, c, g)
	conntest.RequireAllOK(t, g.stdout.String(), []string{"write", "read", "send"}, []string{"4096", "65536"})
	conntest.RequireAllOK(t, c.stdout.String(), []string{"write", "read", "send"}, []string{"4096", "65536"})
	e := established(t, g)
	assert.Equal(t, "on", e["crc"], "siw asked for CRC: %v", e)
	assert.Equal(t, "2", e["mpa_rev"])
	assert.Contains(t, c.stderr.String(), "siw-peer: siw: knobs build with mpa_crc_required=1\n")
	requireSiwLink(t, c)
}

// TestDockerEntryPoint: the entry point's own answers. The program's exit
// status is the container's; an unknown command, a port in use on the host
// and a guest that cannot boot each get a clear error and their own status.
func TestDockerEntryPoint(t *testing.T) {
	t.Run("program-status", func(t *testing.T) {
		closed := strconv.Itoa(freePort(t))
		c := container(t, "iwtest-refused", "iwtest", "-c", "-a", "127.0.0.1", "-p", closed, "-T", "write", "-S", "1", "-t", "20")
		require.Equal(t, 1, c.wait(t, bootWait+runWait), "iwtest's own status for a failed session: %s", c)
		assert.Contains(t, c.stderr.String(), "iwtest: rdma_connect")
		requireSiwLink(t, c)
	})
	t.Run("unknown-command", func(t *testing.T) {
		c := container(t, "unknown", "rpong", "-s")
		require.Equal(t, 2, c.wait(t, time.Minute), "%s", c)
		assert.Contains(t, c.stderr.String(), `siw-peer: unknown command "rpong"; commands: rping, iwtest`)
	})
	t.Run("port-in-use", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		c := container(t, "port-in-use", "rping", "-s", "-p", strconv.Itoa(port))
		require.Equal(t, 69, c.wait(t, time.Minute), "%s", c)
		assert.Contains(t, c.stderr.String(), fmt.Sprintf("siw-peer: port %d is in use on the host", port))
	})
	t.Run("boot-failure", func(t *testing.T) {
		// 64 MB cannot hold the kernel and its 22 MB initramfs.
		c := container(t, "no-boot", "--memory", "64", "ibv_devinfo")
		require.Equal(t, 70, c.wait(t, bootWait), "%s", c)
		assert.Contains(t, c.stderr.String(), "siw-peer: the guest did not boot: ")
	})
}
