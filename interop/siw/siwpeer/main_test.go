package siwpeer

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// The test binary plays every part of the guest: run as QEMU (fakeQEMUEnv)
// it serves the agent on the -virtfs share, as the guest's init would; run
// under the name of a guest program (a link in the fake guest's PATH) it
// stands in for that program.
const (
	fakeQEMUEnv = "SIWPEER_FAKE_QEMU"
	fakeArgsEnv = "SIWPEER_FAKE_ARGS" // where the fake rping records its arguments
	fakeExitEnv = "SIWPEER_FAKE_EXIT" // its exit status
	fakeKillEnv = "SIWPEER_FAKE_KILL" // set: it kills the fake QEMU (the guest dies)
	fakeSlowEnv = "SIWPEER_FAKE_SLOW" // set: the fake QEMU takes a minute to boot
)

func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "rping":
		os.Exit(fakeRping(os.Args[1:]))
	case "rdma":
		fmt.Println("link siw0/1 state ACTIVE physical_state LINK_UP netdev eth0 ")
		os.Exit(0)
	case "ping":
		os.Exit(0)
	}
	if os.Getenv(fakeQEMUEnv) == "1" {
		os.Exit(fakeQEMU(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

func fakeQEMU(args []string) int {
	var share string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-virtfs" {
			for _, kv := range strings.Split(args[i+1], ",") {
				if v, ok := strings.CutPrefix(kv, "path="); ok {
					share = v
				}
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if os.Getenv(fakeSlowEnv) != "" {
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(time.Minute):
		}
	}
	if err := lab.ServeAgent(ctx, share, lab.AgentOptions{Poll: 5 * time.Millisecond}); err != nil {
		return 4
	}
	return 0
}

// fakeRping records its arguments; as a server (-s) it listens on -p's port
// on 127.0.0.1 and serves one connection.
func fakeRping(args []string) int {
	if f := os.Getenv(fakeArgsEnv); f != "" {
		_ = os.WriteFile(f, []byte(strings.Join(args, "\n")), 0o644)
	}
	if os.Getenv(fakeKillEnv) != "" {
		_ = syscall.Kill(os.Getppid(), syscall.SIGKILL)
		time.Sleep(200 * time.Millisecond)
	}
	port := ""
	server := false
	for i, a := range args {
		switch {
		case a == "-s":
			server = true
		case a == "-p" && i+1 < len(args):
			port = args[i+1]
		}
	}
	if server {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake rping:", err)
			return 1
		}
		c, err := l.Accept()
		if err != nil {
			return 1
		}
		c.Close()
		fmt.Println("served one connection")
	}
	code, _ := strconv.Atoi(os.Getenv(fakeExitEnv))
	return code
}

// fakeGuest sets up the image description, the fake QEMU and the fake
// guest programs, and returns an Env for Main.
func fakeGuest(t *testing.T) Env {
	t.Helper()
	dir := t.TempDir()
	var env strings.Builder
	for _, k := range []string{"SIW_KERNEL", "SIW_INITRD", "SIW_AGENT"} {
		p := filepath.Join(dir, k)
		require.NoError(t, os.WriteFile(p, []byte(k), 0o644))
		env.WriteString(k + "=" + p + "\n")
	}
	env.WriteString("SIW_KNOBS=mpa_crc_required,peer_to_peer,mpa_version\n")
	labEnv := filepath.Join(dir, "lab.env")
	require.NoError(t, os.WriteFile(labEnv, []byte(env.String()), 0o644))
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	for _, n := range []string{"rping", "rdma", "ping"} {
		require.NoError(t, os.Symlink(exe, filepath.Join(bin, n)))
	}
	// The agent's jobs inherit the fake QEMU's environment, which is ours.
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv(fakeQEMUEnv, "1")
	work := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	return Env{LabEnv: labEnv, QEMU: exe, WorkDir: work}
}

type mainRun struct {
	stdout, stderr testutil.Buffer
	code           chan int
	sigs           chan os.Signal
}

func startMain(env Env, args ...string) *mainRun {
	r := &mainRun{code: make(chan int, 1), sigs: make(chan os.Signal, 2)}
	env.Stdout, env.Stderr, env.Signals = &r.stdout, &r.stderr, r.sigs
	go func() { r.code <- Main(context.Background(), args, env) }()
	return r
}

func (r *mainRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case c := <-r.code:
		return c
	case <-time.After(time.Minute):
		t.Fatalf("Main did not return\nstdout:\n%s\nstderr:\n%s", r.stdout.String(), r.stderr.String())
		return -1
	}
}

func (r *mainRun) waitStdout(t *testing.T, substr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(r.stdout.String(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on stdout:\n%s\nstderr:\n%s", substr, r.stdout.String(), r.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestServerIsReadyOnlyOnceItListens(t *testing.T) {
	env := fakeGuest(t)
	port := freePort(t)
	r := startMain(env, "rping", "-s", "-p", strconv.Itoa(port), "-C", "1")
	ready := fmt.Sprintf("READY rping 127.0.0.1:%d\n", port)
	r.waitStdout(t, ready)
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err, "READY came before the program listened")
	c.Close()
	require.Equal(t, 0, r.wait(t), r.stderr.String())
	assert.Equal(t, ready+"served one connection\n", r.stdout.String(), "READY, then the program's output")
	kernel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	require.NoError(t, err)
	assert.Contains(t, r.stderr.String(), "siw-peer: guest kernel "+strings.TrimSpace(string(kernel)))
	assert.Contains(t, r.stderr.String(), "siw-peer: link siw0/1 state ACTIVE physical_state LINK_UP netdev eth0\n")
}

func TestClientGetsTheGuestsViewAndItsExitStatusIsMains(t *testing.T) {
	env := fakeGuest(t)
	argsFile := filepath.Join(t.TempDir(), "args")
	t.Setenv(fakeArgsEnv, argsFile)
	t.Setenv(fakeExitEnv, "7")
	r := startMain(env, "rping", "-c", "-a", "127.0.0.1", "-p", "9", "two words", "it's")
	require.Equal(t, 7, r.wait(t), r.stderr.String())
	b, err := os.ReadFile(argsFile)
	require.NoError(t, err)
	assert.Equal(t, []string{"-c", "-a", lab.HostIP, "-p", "9", "two words", "it's"}, strings.Split(string(b), "\n"))
	assert.NotContains(t, r.stdout.String(), "READY", "a client is not a server")
}

func TestASignalReachesTheGuestProgram(t *testing.T) {
	env := fakeGuest(t)
	port := freePort(t)
	r := startMain(env, "rping", "-s", "-p", strconv.Itoa(port))
	r.waitStdout(t, "READY")
	r.sigs <- syscall.SIGTERM
	assert.Equal(t, 128+int(syscall.SIGTERM), r.wait(t), r.stderr.String())
}

func TestASignalDuringTheBootEndsIt(t *testing.T) {
	env := fakeGuest(t)
	t.Setenv(fakeSlowEnv, "1")
	r := startMain(env, "rping", "-s", "-p", strconv.Itoa(freePort(t)))
	time.Sleep(500 * time.Millisecond) // QEMU is up, the agent is not
	start := time.Now()
	r.sigs <- syscall.SIGTERM
	assert.Equal(t, 128+int(syscall.SIGTERM), r.wait(t), r.stderr.String())
	assert.Less(t, time.Since(start), 20*time.Second, "the boot was not waited out")
	assert.Contains(t, r.stderr.String(), "siw-peer: terminated before rping started")
	ents, err := os.ReadDir(env.WorkDir)
	require.NoError(t, err)
	assert.Empty(t, ents, "the boot's folder is gone")
}

func TestAGuestThatDiesIsReported(t *testing.T) {
	env := fakeGuest(t)
	t.Setenv(fakeKillEnv, "1")
	r := startMain(env, "rping", "-c", "-a", "127.0.0.1")
	assert.Equal(t, ExitGuest, r.wait(t))
	assert.Contains(t, r.stderr.String(), "siw-peer: the guest stopped while rping ran")
}

func TestAGuestThatDoesNotBootIsReported(t *testing.T) {
	env := fakeGuest(t)
	env.QEMU = "/bin/false"
	r := startMain(env, "ibv_devinfo")
	assert.Equal(t, ExitGuest, r.wait(t))
	assert.Contains(t, r.stderr.String(), "siw-peer: the guest did not boot: ")
	assert.Contains(t, r.stderr.String(), "attempt 3", "boot is retried")
}

func TestAServerPortInUseIsReportedBeforeBoot(t *testing.T) {
	env := fakeGuest(t)
	env.QEMU = "/nonexistent/qemu" // booting would fail differently
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	r := startMain(env, "iwtest", "-s", "-p", strconv.Itoa(port))
	assert.Equal(t, ExitPortInUse, r.wait(t))
	assert.Contains(t, r.stderr.String(), fmt.Sprintf("siw-peer: port %d is in use on the host", port))
}

func TestUsageErrorsNeedNoGuest(t *testing.T) {
	env := fakeGuest(t)
	env.QEMU = "/nonexistent/qemu"
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"rpong", "-s"}, `unknown command "rpong"; commands: rping, iwtest, ib_write_bw`},
		{[]string{"--siw", "peer_to_peer", "rping", "-s"}, "--siw peer_to_peer: want NAME=VALUE"},
		{[]string{"--siw", "zcopy_tx=1", "rping", "-s"}, "has no parameter zcopy_tx (it has mpa_crc_required, peer_to_peer, mpa_version)"},
		{[]string{"--memory", "8", "rping", "-s"}, "--memory 8"},
		{[]string{"--no-such-option", "rping"}, "flag provided but not defined"},
		{[]string{"rping", "-s", "-p", "0"}, "needs a fixed port"},
		{[]string{"rping", "-c", "-a", "127.0.0.2"}, "only 127.0.0.1 of the host is reachable"},
		{[]string{"shell", "extra"}, "shell takes no arguments"},
		{[]string{"--host-siw", "--siw", "peer_to_peer=1", "rping", "-s"}, "--siw needs the QEMU guest"},
	} {
		r := startMain(env, c.args...)
		assert.Equal(t, ExitUsage, r.wait(t), "%v", c.args)
		assert.Contains(t, r.stderr.String(), c.msg, "%v", c.args)
	}
	r := startMain(env)
	assert.Equal(t, ExitUsage, r.wait(t))
	assert.Contains(t, r.stderr.String(), "usage: docker run")
	r = startMain(env, "help")
	assert.Equal(t, 0, r.wait(t))
	assert.Contains(t, r.stdout.String(), "Exit status:")
}
