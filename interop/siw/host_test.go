//go:build interop

package siw_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// hostIP is how the guest reaches the host: QEMU's user networking maps
// 10.0.2.2:PORT to the host's 127.0.0.1:PORT.
const hostIP = "10.0.2.2"

// peerBin is the iwarp-peer binary built once per run (runMain), without
// the race detector: these tests test the peer, not Go code. outDir is
// where failed scenarios keep their logs.
var peerBin, outDir string

// buildPeer builds cmd/iwarp-peer into dir.
func buildPeer(dir string) (string, error) {
	bin := filepath.Join(dir, "iwarp-peer")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/iwarp-go/iwarp-go/cmd/iwarp-peer")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building iwarp-peer: %v\n%s", err, out)
	}
	return bin, nil
}

// hostProc is an iwarp-peer process on the host.
type hostProc struct {
	name     string
	args     []string
	cmd      *exec.Cmd
	out, err conntest.LockedBuffer
	done     chan struct{}
	code     int
	start    time.Time
}

// hostResult is what a finished host process left behind.
type hostResult struct {
	Name, Stdout, Stderr string
	Code                 int
	Wall                 time.Duration
}

func (r *hostResult) OK() bool { return r.Code == 0 }

func (r *hostResult) String() string {
	return fmt.Sprintf("host %s: exit %d after %v\n--- stdout\n%s--- stderr\n%s", r.Name, r.Code, r.Wall.Round(time.Millisecond),
		tail(r.Stdout, 60), tail(r.Stderr, 30))
}

func tail(s string, lines int) string {
	l := strings.SplitAfter(s, "\n")
	if len(l) > lines {
		l = append([]string{fmt.Sprintf("[… %d lines]\n", len(l)-lines)}, l[len(l)-lines:]...)
	}
	return strings.Join(l, "")
}

// startHost starts iwarp-peer with args. The process is killed when ctx
// ends or the test finishes; if the test failed its output is kept in
// outDir/<test name>/host-<name>.{out,err}.
func startHost(t *testing.T, ctx context.Context, name string, args ...string) *hostProc {
	t.Helper()
	require.NotEmpty(t, peerBin, "iwarp-peer was not built")
	p := &hostProc{name: name, args: args, done: make(chan struct{}), start: time.Now()}
	p.cmd = exec.CommandContext(ctx, peerBin, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	p.cmd.WaitDelay = 5 * time.Second
	require.NoError(t, p.cmd.Start())
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		if err != nil {
			p.code = -1
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() >= 0 {
				p.code = ee.ExitCode()
			}
		}
		close(p.done)
	}()
	t.Logf("host %s: iwarp-peer %s", name, strings.Join(args, " "))
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	artifacts(t).procs = append(artifacts(t).procs, p)
	return p
}

// hostArtifacts are what a test keeps besides the guest's jobs and
// captures (which lab.VM.Track keeps): host processes' output and
// captures copied out of the guest's memory.
type hostArtifacts struct {
	procs []*hostProc
	files []string
}

var kept struct {
	sync.Mutex
	m map[*testing.T]*hostArtifacts
}

func artifacts(t *testing.T) *hostArtifacts {
	kept.Lock()
	defer kept.Unlock()
	if kept.m == nil {
		kept.m = map[*testing.T]*hostArtifacts{}
	}
	a := kept.m[t]
	if a == nil {
		a = &hostArtifacts{}
		kept.m[t] = a
	}
	return a
}

// keepHostArtifacts copies t's host artifacts to outDir/<test name>/ if t
// failed. scenario registers it to run after lab's Track.
func keepHostArtifacts(t *testing.T) {
	kept.Lock()
	a := kept.m[t]
	delete(kept.m, t)
	kept.Unlock()
	if a == nil || !t.Failed() || outDir == "" {
		return
	}
	dst := filepath.Join(outDir, strings.NewReplacer("/", "_", " ", "_", ":", "_").Replace(t.Name()))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Logf("keeping host artifacts: %v", err)
		return
	}
	for _, p := range a.procs {
		cmdline := "iwarp-peer " + strings.Join(p.args, " ") + "\n"
		_ = os.WriteFile(filepath.Join(dst, "host-"+p.name+".out"), []byte(cmdline+p.out.String()), 0o644)
		_ = os.WriteFile(filepath.Join(dst, "host-"+p.name+".err"), []byte(p.err.String()), 0o644)
	}
	for _, f := range a.files {
		if b, err := os.ReadFile(f); err == nil {
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
	}
}

// waitOutput waits until the process has printed substr on stdout and
// returns what it printed so far; it fails early if the process exits.
func (p *hostProc) waitOutput(t *testing.T, timeout time.Duration, substr string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if s := p.out.String(); strings.Contains(s, substr) {
			return s
		}
		select {
		case <-p.done:
			if s := p.out.String(); strings.Contains(s, substr) {
				return s
			}
			t.Fatalf("host %s exited before printing %q:\n%s", p.name, substr, p.result())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %s: no %q within %v:\n%s", p.name, substr, timeout, p.result())
		}
	}
}

// result reports the process (it need not have exited).
func (p *hostProc) result() *hostResult {
	r := &hostResult{Name: p.name, Stdout: p.out.String(), Stderr: p.err.String(), Code: -1, Wall: time.Since(p.start)}
	select {
	case <-p.done:
		r.Code = p.code
	default:
	}
	return r
}

// wait waits for the process to exit, at most timeout; then it is killed
// and the test fails.
func (p *hostProc) wait(t *testing.T, timeout time.Duration) *hostResult {
	t.Helper()
	select {
	case <-p.done:
		return p.result()
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("host %s did not finish within %v:\n%s", p.name, timeout, p.result())
		return nil
	}
}

// runHost runs iwarp-peer to completion within timeout.
func runHost(t *testing.T, ctx context.Context, timeout time.Duration, name string, args ...string) *hostResult {
	t.Helper()
	return startHost(t, ctx, name, args...).wait(t, timeout)
}

// guestPortAddr splits the forwarded host address of a guest port.
func guestPortAddr(t *testing.T, guestPort int) (host, port string) {
	t.Helper()
	addr, err := vm.HostAddr(guestPort)
	require.NoError(t, err)
	host, port, err = net.SplitHostPort(addr)
	require.NoError(t, err)
	return host, port
}

// listenPort reads the port from iwtest's "LISTENING port=N" line.
func listenPort(t *testing.T, out string) int {
	t.Helper()
	rows := conntest.Lines(out, "LISTENING")
	require.NotEmpty(t, rows, out)
	port, err := strconv.Atoi(rows[0]["port"])
	require.NoError(t, err, out)
	return port
}

// memCapture is a tcpdump in the guest that writes into the guest's
// memory (its /tmp is a tmpfs) and is copied to the share when it stops.
// lab.StartCapture writes every packet through 9p at once, which under
// TCG falls behind the bursts of multi-megabyte transfers and drops
// packets; a capture of data-heavy host↔guest sessions would be
// incomplete.
type memCapture struct {
	p    *lab.Proc
	name string
}

// startMemCapture starts the capture and returns once tcpdump listens.
func startMemCapture(t *testing.T, ctx context.Context, name, iface, filter string) *memCapture {
	t.Helper()
	// --immediate-mode: without it packets still in the kernel's ring when
	// tcpdump is stopped are never written.
	script := fmt.Sprintf("exec tcpdump -i %s -n --immediate-mode -B 65536 -s 0 -w /tmp/%s.pcap %s", iface, name, filter)
	p, err := vm.Start(ctx, "tcpdump-"+name, script, 0)
	require.NoError(t, err)
	require.NoError(t, p.WaitOutput(ctx, 30*time.Second, "listening on"))
	return &memCapture{p: p, name: name}
}

var droppedRe = regexp.MustCompile(`(?m)^(\d+) packets? dropped by kernel`)

// stop ends tcpdump, requires that it dropped nothing, copies the capture
// to the share and returns its host path.
func (c *memCapture) stop(t *testing.T, ctx context.Context) string {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	if !c.p.Exited() {
		require.NoError(t, c.p.Signal(syscall.SIGINT))
	}
	r, err := c.p.Wait(ctx, 30*time.Second)
	require.NoError(t, err, "%s", r)
	m := droppedRe.FindStringSubmatch(r.Stderr)
	require.NotNil(t, m, "tcpdump printed no statistics: %s", r)
	guestFile := "/tmp/" + c.name + ".pcap"
	res := run(t, ctx, 2*time.Minute, "copy-"+c.name, fmt.Sprintf("mkdir -p /mnt/out && cp %s /mnt/out/ && rm %s", guestFile, guestFile))
	mustOK(t, res)
	host := filepath.Join(vm.Share(), "out", c.name+".pcap")
	artifacts(t).files = append(artifacts(t).files, host)
	require.Equal(t, "0", m[1], "packets dropped by the kernel: the capture %s is incomplete", c.name)
	st, err := os.Stat(host)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(24), "capture %s holds no packets: %s", c.name, r.Stderr)
	return host
}
