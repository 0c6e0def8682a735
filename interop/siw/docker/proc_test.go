//go:build interopdocker

package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

// proc is a process of a scenario: iwarp-peer, or the docker client that
// runs a container. It is killed (and its container removed) when the test
// ends.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr testutil.Buffer
	done           chan struct{}
	code           int
}

func start(t *testing.T, name string, argv ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	require.NoError(t, p.cmd.Start())
	t.Logf("%s: %s", name, strings.Join(argv, " "))
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee) && ee.ExitCode() >= 0:
			p.code = ee.ExitCode()
		default:
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// peer starts iwarp-peer on the host.
func peer(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return start(t, name, append([]string{peerBin}, args...)...)
}

// container starts the image with args (entry point options, command, the
// program's arguments) on the host network. The container is removed when
// the test ends, whatever state it is in.
func container(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	cname := "siw-peer-test-" + name + "-" + hex.EncodeToString(id)
	p := start(t, "container "+name, append([]string{"docker", "run", "--rm", "--network", "host", "--name", cname, image}, args...)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = exec.CommandContext(ctx, "docker", "rm", "-f", cname).Run()
	})
	return p
}

func (p *proc) String() string {
	code := "running"
	select {
	case <-p.done:
		code = fmt.Sprintf("exit %d", p.code)
	default:
	}
	return fmt.Sprintf("%s (%s)\n--- stdout\n%s--- stderr\n%s", p.name, code, tail(p.stdout.String()), tail(p.stderr.String()))
}

func tail(s string) string {
	l := strings.SplitAfter(s, "\n")
	if len(l) > 40 {
		l = append([]string{fmt.Sprintf("[… %d lines]\n", len(l)-40)}, l[len(l)-40:]...)
	}
	return strings.Join(l, "")
}

// waitStdout waits until the process has printed substr on stdout; it
// fails at once if the process exits first.
func (p *proc) waitStdout(t *testing.T, timeout time.Duration, substr string, others ...*proc) string {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if s := p.stdout.String(); strings.Contains(s, substr) {
			return s
		}
		select {
		case <-p.done:
			if s := p.stdout.String(); strings.Contains(s, substr) {
				return s
			}
			t.Fatalf("%s exited before printing %q:\n%s%s", p.name, substr, p, describe(others))
		case <-deadline.C:
			t.Fatalf("%s: no %q within %v:\n%s%s", p.name, substr, timeout, p, describe(others))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// wait waits for the process to exit and returns its exit status.
func (p *proc) wait(t *testing.T, timeout time.Duration, others ...*proc) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("%s did not finish within %v:\n%s%s", p.name, timeout, p, describe(others))
		return -1
	}
}

// requireOK waits for each process and requires a zero exit status.
func requireOK(t *testing.T, timeout time.Duration, ps ...*proc) {
	t.Helper()
	for _, p := range ps {
		require.Equal(t, 0, p.wait(t, timeout, ps...), "%s%s", p, describe(ps))
	}
}

func describe(ps []*proc) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("\n" + p.String())
	}
	return b.String()
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago;
// nothing listens on it (a closed port, for "unreachable", too).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
