package siwpeer

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// shellPorts are forwarded from the same host ports in a shell, where they
// are free: rping's, iwtest's and perftest's defaults.
var shellPorts = []int{7174, 7175, 18515}

// shell boots the guest with a root shell on this terminal.
func (r *runner) shell(ctx context.Context) (int, error) {
	cfg, err := r.labConfig()
	if err != nil {
		return 0, err
	}
	if len(r.o.siw) > 0 {
		cfg.ExtraAppend = "labsiw=" + strings.Join(r.o.siw, ",")
	}
	cfg.Forwards = []lab.Forward{}
	var fwd, busy []string
	for _, p := range shellPorts {
		if portFree(p) != nil {
			busy = append(busy, fmt.Sprint(p))
			continue
		}
		cfg.Forwards = append(cfg.Forwards, lab.Forward{Host: p, Guest: p})
		fwd = append(fwd, fmt.Sprint(p))
	}
	share := r.o.share
	if share == "" {
		dir, err := os.MkdirTemp(r.env.WorkDir, "siw-shell-")
		if err != nil {
			return 0, fail(ExitGuest, "%v", err)
		}
		defer os.RemoveAll(dir)
		share = dir
	}
	if f, ok := r.env.Stdin.(*os.File); !ok || !isTerminal(f) {
		r.say("stdin is not a terminal: for an interactive shell use docker run -it")
	}
	r.say("a root shell in the guest: siw0 is on eth0 (%s); the Docker host is %s", lab.GuestIP, lab.HostIP)
	r.say("/mnt in the guest is %s here (--share DIR with docker run -v HOSTDIR:DIR keeps its files)", share)
	if len(fwd) > 0 {
		r.say("guest ports %s are forwarded from the same ports on the host's 127.0.0.1", strings.Join(fwd, ", "))
	}
	if len(busy) > 0 {
		r.say("not forwarded (in use on the host): %s", strings.Join(busy, ", "))
	}
	r.say("leave with: poweroff -f (or Ctrl-A x)")
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.env.Signals:
			cancel()
		case <-sctx.Done():
		}
	}()
	if err := lab.Shell(sctx, cfg, share, r.env.Stdin, r.env.Stdout, r.env.Stderr); err != nil {
		return 0, fail(ExitGuest, "%v", err)
	}
	return 0, nil
}
