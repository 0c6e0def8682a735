package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// AgentOptions tune [ServeAgent].
type AgentOptions struct {
	// Poll is how often the share is scanned for new commands; 0 means 50ms.
	Poll time.Duration
	// Log receives one line per event; nil discards.
	Log io.Writer
	// KillWait bounds how long shutdown waits for killed jobs; 0 means 5s.
	KillWait time.Duration
}

type agentJob struct {
	spec     jobSpec
	cmd      *exec.Cmd
	start    time.Time
	done     chan struct{}
	listened bool
}

type agent struct {
	share string
	opt   AgentOptions
	jobs  map[string]*agentJob
	kills map[string]bool
}

// ServeAgent is the guest half of the lab: it runs inside the VM (the
// iwlab-agent command) with the 9p share mounted at share. It starts every
// job dropped into cmd/ as its own process group, streams its stdout and
// stderr into res/, reports the pid, a listening socket and the exit status
// through flag files, delivers signals asked for by the host, and returns
// when the host writes cmd/poweroff (nil) or ctx ends (ctx.Err()). Jobs
// still running then are killed.
func ServeAgent(ctx context.Context, share string, opt AgentOptions) error {
	if opt.Poll <= 0 {
		opt.Poll = 50 * time.Millisecond
	}
	if opt.KillWait <= 0 {
		opt.KillWait = 5 * time.Second
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	for _, d := range []string{cmdDir, resDir, outDir} {
		if err := os.MkdirAll(filepath.Join(share, d), 0o755); err != nil {
			return err
		}
	}
	a := &agent{share: share, opt: opt, jobs: map[string]*agentJob{}, kills: map[string]bool{}}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if err := writeJSONFlag(filepath.Join(share, agentReady),
		readyInfo{Kernel: strings.TrimSpace(string(kernel)), PID: os.Getpid()}); err != nil {
		return err
	}
	a.logf("serving %s", share)
	tick := time.NewTicker(opt.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			a.killAll()
			return ctx.Err()
		case <-tick.C:
		}
		if stop := a.scan(); stop {
			a.logf("poweroff requested")
			a.killAll()
			return nil
		}
		a.checkListeners()
	}
}

func (a *agent) logf(format string, args ...any) {
	fmt.Fprintf(a.opt.Log, "agent: "+format+"\n", args...)
}

func (a *agent) res(id, suffix string) string {
	return filepath.Join(a.share, resDir, id+suffix)
}

// scan handles the files in cmd/ and reports whether poweroff was asked for.
func (a *agent) scan() bool {
	ents, err := os.ReadDir(filepath.Join(a.share, cmdDir))
	if err != nil {
		a.logf("read cmd: %v", err)
		return false
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "."):
			// a flag still being written
		case name == poweroffCmd:
			return true
		case strings.HasSuffix(name, ".job"):
			id := strings.TrimSuffix(name, ".job")
			if _, seen := a.jobs[id]; !seen {
				a.start(id)
			}
		case strings.Contains(name, ".kill."):
			if !a.kills[name] {
				a.kills[name] = true
				a.kill(name)
			}
		}
	}
	return false
}

func (a *agent) fail(id string, j *agentJob, msg string) {
	a.logf("job %s: %s", id, msg)
	_ = writeJSONFlag(a.res(id, ".exit"), exitInfo{Code: -1, Error: msg})
	close(j.done)
}

func (a *agent) start(id string) {
	j := &agentJob{done: make(chan struct{}), start: time.Now()}
	a.jobs[id] = j
	if !validJobID(id) {
		a.fail(id, j, "invalid job id")
		return
	}
	if err := readJSON(filepath.Join(a.share, cmdDir, id+".job"), &j.spec); err != nil {
		a.fail(id, j, err.Error())
		return
	}
	if len(j.spec.Argv) == 0 {
		a.fail(id, j, "empty argv")
		return
	}
	if p := j.spec.ListenPort; p > 0 && isListening(p) {
		a.fail(id, j, fmt.Sprintf("port %d already has a listener", p))
		return
	}
	stdout, err := os.Create(a.res(id, ".out"))
	if err != nil {
		a.fail(id, j, err.Error())
		return
	}
	defer stdout.Close()
	stderr, err := os.Create(a.res(id, ".err"))
	if err != nil {
		a.fail(id, j, err.Error())
		return
	}
	defer stderr.Close()
	cmd := exec.Command(j.spec.Argv[0], j.spec.Argv[1:]...)
	cmd.Env = append(os.Environ(), j.spec.Env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = groupAttr()
	if err := cmd.Start(); err != nil {
		a.fail(id, j, err.Error())
		return
	}
	j.cmd = cmd
	_ = writeFlag(a.res(id, ".pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"))
	a.logf("job %s: pid %d: %q", id, cmd.Process.Pid, j.spec.Argv)
	go func() {
		err := cmd.Wait()
		info := exitInfo{Code: cmd.ProcessState.ExitCode(), WallMS: time.Since(j.start).Milliseconds()}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			info.Signal = ws.Signal().String()
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			info.Error = err.Error()
		}
		if werr := writeJSONFlag(a.res(id, ".exit"), info); werr != nil {
			a.logf("job %s: %v", id, werr)
		}
		close(j.done)
	}()
}

// kill handles cmd/<id>.kill.<n>, whose content is a signal number.
func (a *agent) kill(name string) {
	id := name[:strings.Index(name, ".kill.")]
	b, err := os.ReadFile(filepath.Join(a.share, cmdDir, name))
	if err != nil {
		a.logf("%s: %v", name, err)
		return
	}
	sig, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || sig <= 0 || sig > 64 {
		a.logf("%s: bad signal %q", name, b)
		return
	}
	j := a.jobs[id]
	if j == nil || j.cmd == nil {
		return
	}
	select {
	case <-j.done:
		return
	default:
	}
	// The whole process group: a shell script's children go too.
	if err := killGroup(j.cmd.Process.Pid, sig); err != nil {
		a.logf("job %s: kill %d: %v", id, sig, err)
	}
}

func (a *agent) checkListeners() {
	for id, j := range a.jobs {
		if j.listened || j.spec.ListenPort == 0 || j.cmd == nil {
			continue
		}
		select {
		case <-j.done:
			continue
		default:
		}
		if isListening(j.spec.ListenPort) {
			j.listened = true
			_ = writeFlag(a.res(id, ".listen"), []byte(strconv.Itoa(j.spec.ListenPort)+"\n"))
			a.logf("job %s: listening on %d", id, j.spec.ListenPort)
		}
	}
}

func (a *agent) killAll() {
	deadline := time.After(a.opt.KillWait)
	for id, j := range a.jobs {
		if j.cmd == nil {
			continue
		}
		select {
		case <-j.done:
			continue
		default:
		}
		_ = killGroup(j.cmd.Process.Pid, int(syscall.SIGKILL))
		select {
		case <-j.done:
		case <-deadline:
			a.logf("job %s: still running after SIGKILL", id)
		}
	}
}
