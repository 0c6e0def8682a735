package siwpeer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/syncwriter"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// primeNeighbour makes the guest resolve the host's MAC address before a
// client starts: on Linux 6.1 an rdma_cm client whose ARP request is
// answered before it queues its address resolution can wait out its whole
// timeout (interop/siw/README.md, "A guest rdma_cm client needs a
// neighbour entry").
const primeNeighbour = "ping -c 1 -W 2 " + lab.HostIP + " >/dev/null 2>&1; "

// forever bounds waits that the program's own life bounds.
const forever = 100 * 365 * 24 * time.Hour

// labConfig reads the image description and applies the options.
func (r *runner) labConfig() (lab.Config, error) {
	cfg, err := lab.ConfigFromFile(r.env.LabEnv)
	if err != nil {
		return cfg, fail(ExitGuest, "%v", err)
	}
	cfg.QEMU = r.env.QEMU
	cfg.WorkDir = r.env.WorkDir
	cfg.MemoryMB, cfg.CPUs, cfg.BootTimeout = r.o.memoryMB, r.o.cpus, r.o.bootTimeout
	cfg.Log = r.logw()
	for _, p := range r.o.siw {
		if err := lab.CheckSiwParam(p); err != nil {
			return cfg, fail(ExitUsage, "--siw %s: want NAME=VALUE", p)
		}
		name, _, _ := strings.Cut(p, "=")
		if len(cfg.SiwKnobs) > 0 && !slices.Contains(cfg.SiwKnobs, name) {
			return cfg, fail(ExitUsage, "--siw %s: the knobs build of siw.ko has no parameter %s (it has %s)",
				p, name, strings.Join(cfg.SiwKnobs, ", "))
		}
	}
	return cfg, nil
}

// portFree checks that a server's port can be forwarded from the host.
func portFree(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fail(ExitPortInUse, "port %d is in use on the host (127.0.0.1:%d): %v; pick another with -p",
			port, port, errors.Unwrap(err))
	}
	return l.Close()
}

// guest runs prog in the QEMU guest.
func (r *runner) guest(ctx context.Context, prog Program, inv *invocation) (int, error) {
	if err := inv.rewriteAddrs(guestAddr); err != nil {
		return 0, fail(ExitUsage, "%s: %v", prog.Name, err)
	}
	cfg, err := r.labConfig()
	if err != nil {
		return 0, err
	}
	cfg.Forwards = []lab.Forward{}
	watch := 0
	if inv.server {
		if err := portFree(inv.port); err != nil {
			return 0, err
		}
		cfg.Forwards = []lab.Forward{{Host: inv.port, Guest: inv.port}}
		watch = inv.port
	}
	// Until the program runs, a signal (docker stop) ends the setup; the
	// context it cancels is the VM's, so QEMU goes too.
	ctx, setupDone := r.interruptible(ctx)
	defer setupDone()
	vm, err := lab.Boot(ctx, cfg)
	if sig := r.interrupted(ctx, setupDone); sig != nil {
		if err == nil {
			r.shutdown(vm)
		}
		return 0, fail(interruptedStatus(sig), "%v before %s started", sig, prog.Name)
	}
	if errors.Is(err, lab.ErrHostPortInUse) {
		return 0, fail(ExitPortInUse, "port %d is in use on the host: QEMU could not forward it: %v", inv.port, err)
	}
	if err != nil {
		return 0, fail(ExitGuest, "the guest did not boot: %v", err)
	}
	defer r.shutdown(vm)
	if len(r.o.siw) > 0 {
		if err := vm.LoadSiw(ctx, lab.SiwKnobs, r.o.siw...); err != nil {
			return 0, fail(ExitGuest, "loading the knobs build of siw.ko with %s: %v", strings.Join(r.o.siw, " "), err)
		}
		r.say("siw: knobs build with %s", strings.Join(r.o.siw, " "))
	}
	if err := r.describe(ctx, vm); err != nil {
		return 0, err
	}
	if sig := setupDone(); sig != nil {
		return 0, fail(interruptedStatus(sig), "%v before %s started", sig, prog.Name)
	}
	p, err := vm.Start(ctx, prog.Name, guestScript(prog, inv), watch)
	if err != nil {
		return 0, fail(ExitGuest, "starting %s in the guest: %v", prog.Name, err)
	}
	stdout := syncwriter.New(r.env.Stdout) // the output followers write beside the entry point
	stop := make(chan struct{})
	outDone := follow(p.StdoutPath(), stdout, stop)
	errDone := follow(p.StderrPath(), r.env.Stderr, stop)
	code, err := r.await(ctx, vm, p, prog, inv, stdout)
	close(stop)
	<-outDone
	<-errDone
	return code, err
}

// interruptible returns a context that the first signal cancels until
// done is called; done reports that signal, if one came.
func (r *runner) interruptible(ctx context.Context) (context.Context, func() os.Signal) {
	ctx, cancel := context.WithCancel(ctx)
	stop := make(chan struct{})
	got := make(chan os.Signal, 1)
	go func() {
		select {
		case sig := <-r.env.Signals:
			got <- sig
			cancel()
		case <-stop:
			got <- nil
		}
	}()
	var once sync.Once
	var sig os.Signal
	return ctx, func() os.Signal {
		once.Do(func() { close(stop); sig = <-got })
		return sig
	}
}

// interrupted reports the signal that cancelled ctx during setup, if one
// did (and ends the watch then).
func (r *runner) interrupted(ctx context.Context, done func() os.Signal) os.Signal {
	if ctx.Err() == nil {
		return nil
	}
	return done()
}

func interruptedStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return ExitGuest
}

// guestScript is the shell command line that runs prog in the guest.
func guestScript(prog Program, inv *invocation) string {
	var b strings.Builder
	if prog.Args != nil && !inv.server {
		b.WriteString(primeNeighbour)
	}
	b.WriteString("exec " + shellQuote(prog.Name))
	for _, a := range inv.args {
		b.WriteString(" " + shellQuote(a))
	}
	return b.String()
}

// shellQuote quotes s for /bin/sh, so that it reaches the program as one
// argument, unchanged.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// describe prints the guest kernel and its siw link, and fails if there is
// no siw link.
func (r *runner) describe(ctx context.Context, vm *lab.VM) error {
	res, err := vm.Run(ctx, time.Minute, "rdma-link", "rdma link show")
	if err != nil {
		return fail(ExitGuest, "rdma link show in the guest: %v", err)
	}
	line := siwLinkLine(res.Stdout, "")
	if line == "" {
		return fail(ExitGuest, "the guest has no siw link: %s", res)
	}
	r.say("guest kernel %s (siw under QEMU, TCG)", vm.Kernel())
	r.say("%s", line)
	return nil
}

// siwLinkLine picks the first line of `rdma link show` output that is a
// siw link (on netdev, if not empty).
func siwLinkLine(out, netdev string) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "link" || !strings.HasPrefix(f[1], "siw") {
			continue
		}
		i := slices.Index(f, "netdev")
		if netdev == "" || i >= 0 && i+1 < len(f) && f[i+1] == netdev {
			return l
		}
	}
	return ""
}

type jobResult struct {
	res *lab.Result
	err error
}

// await relays signals to the job, prints READY once a server listens, and
// returns the job's exit status.
func (r *runner) await(ctx context.Context, vm *lab.VM, p *lab.Proc, prog Program, inv *invocation, stdout *syncwriter.Writer) (int, error) {
	var listened chan error
	if inv.server {
		listened = make(chan error, 1)
		go func() { listened <- p.WaitListening(ctx, r.o.listenTimeout) }()
	}
	done := make(chan jobResult, 1)
	go func() {
		res, err := p.Wait(ctx, forever)
		done <- jobResult{res, err}
	}()
	var timeout <-chan time.Time
	if r.o.timeout > 0 {
		t := time.NewTimer(r.o.timeout)
		defer t.Stop()
		timeout = t.C
	}
	signals := 0
	for {
		select {
		case err := <-listened:
			listened = nil
			switch {
			case err == nil:
				fmt.Fprintf(stdout, "READY %s 127.0.0.1:%d\n", prog.Name, inv.port)
			case errors.Is(err, lab.ErrTimeout) && !p.Exited():
				_, _ = p.Stop(ctx, 2*time.Second)
				return 0, fail(ExitGuest, "%s did not listen on port %d within %s", prog.Name, inv.port, r.o.listenTimeout)
			}
			// Otherwise the program ended before it listened, or the
			// guest stopped: done says which.
		case d := <-done:
			if d.err != nil {
				return 0, fail(ExitGuest, "the guest stopped while %s ran: %v\nconsole:\n%s", prog.Name, d.err, lastLines(vm.Console(), 30))
			}
			return exitStatus(d.res)
		case sig := <-r.env.Signals:
			signals++
			_ = p.Signal(relayed(sig, signals))
		case <-timeout:
			timeout = nil
			_, _ = p.Stop(ctx, 2*time.Second)
			return 0, fail(ExitTimeout, "%s ended after --timeout %s", prog.Name, r.o.timeout)
		}
	}
}

// exitStatus maps a finished job to the status a shell would report.
func exitStatus(res *lab.Result) (int, error) {
	switch {
	case res.Err != "":
		return 0, fail(ExitGuest, "the guest could not run %s: %s", res.Name, res.Err)
	case res.Signal != "":
		return signalStatus(res.Signal), nil
	}
	return res.Code, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// shutdown powers the guest off; the program's status stands whatever
// happens here.
func (r *runner) shutdown(vm *lab.VM) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := vm.Shutdown(ctx); err != nil {
		r.say("shutting the guest down: %v", err)
	}
}
