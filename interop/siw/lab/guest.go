package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrTimeout is wrapped by every error that reports a wait running out.
var ErrTimeout = errors.New("timed out")

// ErrGuestDown is wrapped by errors that report the VM has stopped.
var ErrGuestDown = errors.New("guest is not running")

// DefaultPickup bounds how long the host waits for the agent to start a
// job. The agent polls every 50ms, but a TCG guest can be slow under load.
const DefaultPickup = 30 * time.Second

const hostPoll = 20 * time.Millisecond

// Guest is the host half of the file protocol with a running agent. A [VM]
// embeds one; it can also talk to an agent started by other means.
type Guest struct {
	share string
	alive func() error // nil while the guest runs

	mu    sync.Mutex
	seq   int
	procs []*Proc
	files []artifact
}

type artifact struct {
	seq  int
	path string
}

// NewGuest returns a client for an agent serving share. alive, if not nil,
// is consulted while waiting: a non-nil result ends every wait early.
func NewGuest(share string, alive func() error) *Guest {
	return &Guest{share: share, alive: alive}
}

// Share returns the host path of the share.
func (g *Guest) Share() string { return g.share }

func (g *Guest) down() error {
	if g.alive == nil {
		return nil
	}
	if err := g.alive(); err != nil {
		return fmt.Errorf("%w: %v", ErrGuestDown, err)
	}
	return nil
}

// Result is what a finished guest job left behind.
type Result struct {
	Name   string
	ID     string
	Stdout string
	Stderr string
	// Code is the exit status, or -1 if the job died by a signal or could
	// not be started (then Signal or Err says which).
	Code   int
	Signal string
	Err    string
	Wall   time.Duration
}

// OK reports a zero exit status.
func (r *Result) OK() bool { return r != nil && r.Code == 0 && r.Err == "" }

// String summarises the result with the tail of its output, for test logs.
func (r *Result) String() string {
	if r == nil {
		return "<no result>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "job %s (%s): code=%d", r.Name, r.ID, r.Code)
	if r.Signal != "" {
		fmt.Fprintf(&b, " signal=%s", r.Signal)
	}
	if r.Err != "" {
		fmt.Fprintf(&b, " error=%q", r.Err)
	}
	fmt.Fprintf(&b, " wall=%s\n--- stdout\n%s--- stderr\n%s", r.Wall, tail(r.Stdout, 4000), tail(r.Stderr, 4000))
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// Proc is a job running (or run) in the guest.
type Proc struct {
	g    *Guest
	seq  int
	id   string
	name string
	port int
	nkil int
}

// ID returns the job id (also the stem of its files under res/).
func (p *Proc) ID() string { return p.id }

// Name returns the label the job was started with.
func (p *Proc) Name() string { return p.name }

func (p *Proc) path(suffix string) string { return filepath.Join(p.g.share, resDir, p.id+suffix) }

// Stdout returns what the job has written to stdout so far.
func (p *Proc) Stdout() string { b, _ := os.ReadFile(p.path(".out")); return string(b) }

// Stderr returns what the job has written to stderr so far.
func (p *Proc) Stderr() string { b, _ := os.ReadFile(p.path(".err")); return string(b) }

// StdoutPath and StderrPath return the host paths of the files the job's
// stdout and stderr go to as it runs, for following its output.
func (p *Proc) StdoutPath() string { return p.path(".out") }
func (p *Proc) StderrPath() string { return p.path(".err") }

// Exited reports whether the job has finished.
func (p *Proc) Exited() bool { _, err := os.Stat(p.path(".exit")); return err == nil }

func sanitize(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	if b.Len() == 0 {
		return "job"
	}
	return b.String()
}

// Start runs script with /bin/sh -c in the guest, in the background. If
// listenPort is not zero, the agent watches for a TCP listener on that port
// (see [Proc.WaitListening]); the job is refused if the port already has
// one. Start returns once the agent has started the job (or refused it),
// waiting at most [DefaultPickup].
func (g *Guest) Start(ctx context.Context, name, script string, listenPort int, env ...string) (*Proc, error) {
	g.mu.Lock()
	g.seq++
	seq := g.seq
	p := &Proc{g: g, seq: seq, id: fmt.Sprintf("j%04d-%s", seq, sanitize(name)), name: name, port: listenPort}
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	spec := jobSpec{ID: p.id, Argv: []string{"/bin/sh", "-c", script}, Env: env, ListenPort: listenPort}
	// The agent creates cmd/ too; whoever comes first makes it.
	if err := os.MkdirAll(filepath.Join(g.share, cmdDir), 0o755); err != nil {
		return nil, err
	}
	if err := writeJSONFlag(filepath.Join(g.share, cmdDir, p.id+".job"), spec); err != nil {
		return nil, err
	}
	err := g.waitFor(ctx, DefaultPickup, func() (bool, error) {
		return fileExists(p.path(".pid")) || fileExists(p.path(".exit")), nil
	})
	if err != nil {
		return nil, fmt.Errorf("job %s was not picked up by the agent: %w", p.id, err)
	}
	return p, nil
}

// StartListening is Start followed by WaitListening.
func (g *Guest) StartListening(ctx context.Context, timeout time.Duration, name, script string, port int, env ...string) (*Proc, error) {
	p, err := g.Start(ctx, name, script, port, env...)
	if err != nil {
		return nil, err
	}
	if err := p.WaitListening(ctx, timeout); err != nil {
		_, _ = p.Stop(ctx, time.Second)
		return p, err
	}
	return p, nil
}

// Run runs script in the guest and waits for it to finish. If it has not
// finished after timeout it is killed and the error wraps [ErrTimeout]; the
// Result then holds the output so far. A non-zero exit status is not an
// error: check [Result.OK].
func (g *Guest) Run(ctx context.Context, timeout time.Duration, name, script string, env ...string) (*Result, error) {
	p, err := g.Start(ctx, name, script, 0, env...)
	if err != nil {
		return nil, err
	}
	res, err := p.Wait(ctx, timeout)
	if err != nil {
		r2, _ := p.Stop(ctx, 2*time.Second)
		if r2 != nil {
			res = r2
		}
		return res, err
	}
	return res, nil
}

// WaitListening waits until the agent has seen a TCP listener on the port
// given to Start. It fails early if the job ends first.
func (p *Proc) WaitListening(ctx context.Context, timeout time.Duration) error {
	if p.port == 0 {
		return fmt.Errorf("job %s was started without a listen port", p.id)
	}
	err := p.g.waitFor(ctx, timeout, func() (bool, error) {
		if fileExists(p.path(".listen")) {
			return true, nil
		}
		if p.Exited() {
			r, _ := p.result()
			return false, fmt.Errorf("job %s ended before listening on %d: %s", p.id, p.port, r)
		}
		return false, nil
	})
	if err != nil && errors.Is(err, ErrTimeout) {
		return fmt.Errorf("job %s: no listener on guest port %d: %w\nstderr: %s", p.id, p.port, err, tail(p.Stderr(), 2000))
	}
	return err
}

// WaitOutput waits until the job's stdout or stderr contains substr.
func (p *Proc) WaitOutput(ctx context.Context, timeout time.Duration, substr string) error {
	err := p.g.waitFor(ctx, timeout, func() (bool, error) {
		if strings.Contains(p.Stdout(), substr) || strings.Contains(p.Stderr(), substr) {
			return true, nil
		}
		if p.Exited() {
			r, _ := p.result()
			return false, fmt.Errorf("job %s ended without printing %q: %s", p.id, substr, r)
		}
		return false, nil
	})
	if err != nil && errors.Is(err, ErrTimeout) {
		return fmt.Errorf("job %s: %q not seen: %w\nstdout: %s\nstderr: %s", p.id, substr, err, tail(p.Stdout(), 2000), tail(p.Stderr(), 2000))
	}
	return err
}

// Wait waits for the job to finish and returns its result.
func (p *Proc) Wait(ctx context.Context, timeout time.Duration) (*Result, error) {
	err := p.g.waitFor(ctx, timeout, func() (bool, error) { return p.Exited(), nil })
	if err != nil {
		r := p.partial()
		return r, fmt.Errorf("job %s (%s): %w", p.id, p.name, err)
	}
	return p.result()
}

func (p *Proc) partial() *Result {
	return &Result{Name: p.name, ID: p.id, Stdout: p.Stdout(), Stderr: p.Stderr(), Code: -1}
}

func (p *Proc) result() (*Result, error) {
	var info exitInfo
	if err := readJSON(p.path(".exit"), &info); err != nil {
		return p.partial(), err
	}
	r := p.partial()
	r.Code, r.Signal, r.Err, r.Wall = info.Code, info.Signal, info.Error, time.Duration(info.WallMS)*time.Millisecond
	return r, nil
}

// Signal sends sig to the job's process group.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.g.mu.Lock()
	p.nkil++
	n := p.nkil
	p.g.mu.Unlock()
	return writeFlag(filepath.Join(p.g.share, cmdDir, fmt.Sprintf("%s.kill.%d", p.id, n)), []byte(strconv.Itoa(int(sig))+"\n"))
}

// Stop ends the job: SIGTERM, then SIGKILL if it is still running after
// grace. It returns the job's result (also when it had already finished).
func (p *Proc) Stop(ctx context.Context, grace time.Duration) (*Result, error) {
	if p.Exited() {
		return p.result()
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	if r, err := p.Wait(ctx, grace); err == nil {
		return r, nil
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	return p.Wait(ctx, DefaultPickup)
}

// waitFor polls cond until it reports true, fails, the guest goes down,
// ctx ends or timeout passes.
func (g *Guest) waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	if timeout <= 0 {
		return fmt.Errorf("lab: a wait needs a positive timeout")
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(hostPoll)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		if err := g.down(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%w after %s", ErrTimeout, timeout)
		case <-tick.C:
		}
	}
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }

// since returns the jobs and kept files registered after seq.
func (g *Guest) since(seq int) ([]*Proc, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []*Proc
	for _, p := range g.procs {
		if p.seq > seq {
			ps = append(ps, p)
		}
	}
	var fs []string
	for _, f := range g.files {
		if f.seq > seq {
			fs = append(fs, f.path)
		}
	}
	return ps, fs
}

func (g *Guest) keep(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	g.files = append(g.files, artifact{seq: g.seq, path: path})
}

func (g *Guest) mark() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seq
}

// HostPath returns the host path of a file the guest wrote at guestPath,
// which must lie under the share's guest mount point.
func (g *Guest) HostPath(guestPath string) (string, error) {
	rel, err := filepath.Rel(GuestShare, guestPath)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not under %s", guestPath, GuestShare)
	}
	return filepath.Join(g.share, rel), nil
}
