package lab

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// startAgent serves an agent on a fresh share in this process, as the
// guest would, and returns a host client for it.
func startAgent(t *testing.T) *Guest {
	t.Helper()
	share := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeAgent(ctx, share, AgentOptions{Poll: 5 * time.Millisecond}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Error("agent did not stop")
		}
	})
	g := NewGuest(share, nil)
	require.NoError(t, g.waitFor(ctx, 10*time.Second, func() (bool, error) {
		return fileExists(filepath.Join(share, agentReady)), nil
	}))
	return g
}

func TestAgentRunCollectsOutputAndExitStatus(t *testing.T) {
	g := startAgent(t)
	ctx := context.Background()
	res, err := g.Run(ctx, 10*time.Second, "hello", `echo out; echo err >&2; echo "$LABVAR"; exit 3`, "LABVAR=from-env")
	require.NoError(t, err)
	assert.Equal(t, "out\nfrom-env\n", res.Stdout)
	assert.Equal(t, "err\n", res.Stderr)
	assert.Equal(t, 3, res.Code)
	assert.False(t, res.OK())
	assert.Contains(t, res.ID, "hello")

	res, err = g.Run(ctx, 10*time.Second, "ok", "true")
	require.NoError(t, err)
	assert.True(t, res.OK(), res.String())
}

func TestAgentRunTimeoutKillsTheProcessGroup(t *testing.T) {
	g := startAgent(t)
	ctx := context.Background()
	// The child sleeps in the background; killing only the shell would
	// leave it behind, so its pid is checked afterwards.
	res, err := g.Run(ctx, 300*time.Millisecond, "slow", `sleep 30 & echo $! ; wait`)
	require.ErrorIs(t, err, ErrTimeout)
	require.NotNil(t, res)
	assert.Equal(t, -1, res.Code)
	assert.NotEmpty(t, res.Signal)
	pid := strings.TrimSpace(res.Stdout)
	require.NotEmpty(t, pid)
	require.Eventually(t, func() bool {
		_, err := os.Stat("/proc/" + pid)
		if err != nil {
			return true
		}
		st, _ := os.ReadFile("/proc/" + pid + "/stat")
		return strings.Contains(string(st), ") Z ") // a zombie waiting for its reaper is dead too
	}, 5*time.Second, 10*time.Millisecond, "background child %s survived", pid)
}

func TestAgentWaitListeningSeesTheListenerAppear(t *testing.T) {
	g := startAgent(t)
	ctx := context.Background()
	// Reserve a port, release it, start the job, then listen on it: the
	// agent must report the listener only after it exists.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	p, err := g.Start(ctx, "server", "sleep 30", port)
	require.NoError(t, err)
	err = p.WaitListening(ctx, 200*time.Millisecond)
	require.ErrorIs(t, err, ErrTimeout)

	l, err = net.Listen("tcp", "127.0.0.1:"+itoa(port))
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, p.WaitListening(ctx, 10*time.Second))

	res, err := p.Stop(ctx, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "terminated", res.Signal)
}

func TestAgentRefusesAListenJobOnABusyPort(t *testing.T) {
	g := startAgent(t)
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	p, err := g.Start(ctx, "late", "echo should-not-run", port)
	require.NoError(t, err)
	err = p.WaitListening(ctx, 10*time.Second)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrTimeout)
	res, err := p.Wait(ctx, time.Second)
	require.NoError(t, err)
	assert.Contains(t, res.Err, "already has a listener")
	assert.Empty(t, res.Stdout)
}

func TestAgentWaitListeningFailsWhenTheJobExits(t *testing.T) {
	g := startAgent(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	p, err := g.Start(context.Background(), "dies", "echo bye >&2; exit 7", port)
	require.NoError(t, err)
	err = p.WaitListening(context.Background(), 10*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ended before listening")
	assert.Contains(t, err.Error(), "code=7")
}

func TestAgentWaitOutputAndSignal(t *testing.T) {
	g := startAgent(t)
	ctx := context.Background()
	p, err := g.Start(ctx, "trap", `trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.05; done`, 0)
	require.NoError(t, err)
	require.NoError(t, p.WaitOutput(ctx, 10*time.Second, "ready"))
	require.NoError(t, p.Signal(syscall.SIGINT))
	res, err := p.Wait(ctx, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 5, res.Code)
	assert.Contains(t, res.Stdout, "got-int")
}

func TestAgentPoweroffEndsServe(t *testing.T) {
	share := t.TempDir()
	done := make(chan error, 1)
	go func() { done <- ServeAgent(context.Background(), share, AgentOptions{Poll: 5 * time.Millisecond}) }()
	g := NewGuest(share, nil)
	ctx := context.Background()
	require.NoError(t, g.waitFor(ctx, 10*time.Second, func() (bool, error) {
		return fileExists(filepath.Join(share, agentReady)), nil
	}))
	p, err := g.Start(ctx, "long", "sleep 30", 0)
	require.NoError(t, err)
	require.NoError(t, writeFlag(filepath.Join(share, cmdDir, poweroffCmd), nil))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("agent ignored poweroff")
	}
	res, err := p.Wait(ctx, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "killed", res.Signal)
}

func TestGuestWaitStopsWhenTheGuestGoesDown(t *testing.T) {
	share := t.TempDir()
	down := errors.New("qemu exited")
	g := NewGuest(share, func() error { return down })
	// No agent serves: the wait must end because the guest is down, not
	// by running into its timeout.
	start := time.Now()
	_, err := g.Start(context.Background(), "x", "true", 0)
	require.ErrorIs(t, err, ErrGuestDown)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestGuestWaitNeedsATimeout(t *testing.T) {
	g := NewGuest(t.TempDir(), nil)
	err := g.waitFor(context.Background(), 0, func() (bool, error) { return false, nil })
	require.Error(t, err)
}

func TestAgentRejectsBadJobFiles(t *testing.T) {
	g := startAgent(t)
	require.NoError(t, writeFlag(filepath.Join(g.share, cmdDir, "bad.job"), []byte("{not json")))
	p := &Proc{g: g, id: "bad", name: "bad"}
	res, err := p.Wait(context.Background(), 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, -1, res.Code)
	assert.NotEmpty(t, res.Err)
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestMain(m *testing.M) {
	if os.Getenv(fakeQEMUEnv) == "1" {
		os.Exit(fakeQEMU(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}
