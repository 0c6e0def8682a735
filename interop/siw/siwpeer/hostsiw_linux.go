package siwpeer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// Host-siw mode: on a host whose kernel ships siw.ko (Ubuntu's and Fedora's
// do, Debian's does not) the container, run privileged on the host network,
// uses that siw directly. The programs are the guest's own: the initramfs is
// unpacked into a folder and they run chrooted into it, with the host's
// /dev, /sys and /proc bound in. Not exercised in CI (this project's CI host
// has no RDMA in its kernel).

// hostSiw runs prog over the host kernel's siw.
func (r *runner) hostSiw(ctx context.Context, prog Program, inv *invocation) (int, error) {
	if len(r.o.siw) > 0 {
		return 0, fail(ExitUsage, "--siw needs the QEMU guest: the host's siw.ko has no module parameters")
	}
	cfg, err := lab.ConfigFromFile(r.env.LabEnv)
	if err != nil {
		return 0, fail(ExitGuest, "%v", err)
	}
	if err := loadHostSiw(); err != nil {
		return 0, err
	}
	netdev := r.o.netdev
	if netdev == "" {
		if netdev, err = defaultRouteDev("/proc/net/route"); err != nil {
			return 0, fail(ExitGuest, "%v; name the interface with --netdev", err)
		}
	}
	addr, err := ipv4Of(netdev)
	if err != nil {
		return 0, fail(ExitGuest, "%v", err)
	}
	// rdma_cm cannot use loopback addresses with iWARP, so the host's
	// 127.0.0.1 becomes the address of the siw interface, for both roles.
	if err := inv.rewriteAddrs(func(a string, _ bool) (string, error) {
		if isHostLoopback(a) {
			return addr, nil
		}
		return a, nil
	}); err != nil {
		return 0, fail(ExitUsage, "%s: %v", prog.Name, err)
	}
	if inv.server {
		if err := portFree(inv.port); err != nil {
			return 0, err
		}
	}
	root, err := os.MkdirTemp(r.env.WorkDir, "siw-root-")
	if err != nil {
		return 0, fail(ExitGuest, "%v", err)
	}
	defer os.RemoveAll(root)
	if err := unpackRoot(cfg.Initrd, root); err != nil {
		return 0, fail(ExitGuest, "%v", err)
	}
	defer unbind(root)
	if err := bindHost(root); err != nil {
		return 0, fail(ExitGuest, "%v (is the container --privileged?)", err)
	}
	link, remove, err := r.hostLink(ctx, root, netdev)
	if err != nil {
		return 0, err
	}
	defer remove()
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	r.say("host kernel %s (the host's siw, no QEMU)", strings.TrimSpace(string(rel)))
	r.say("%s", link)

	// The chroot's shell finds the program in the chroot's PATH and
	// passes the arguments on as they are.
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `exec "$0" "$@"`, prog.Name}, inv.args...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/root"}
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.env.Stdin, r.env.Stdout, r.env.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Registered memory counts against RLIMIT_MEMLOCK (as in the guest).
	_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY})
	if err := cmd.Start(); err != nil {
		return 0, fail(ExitGuest, "starting %s: %v", prog.Name, err)
	}
	return r.awaitHost(cmd, prog, inv, addr)
}

// awaitHost is await for a program on the host.
func (r *runner) awaitHost(cmd *exec.Cmd, prog Program, inv *invocation, addr string) (int, error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var poll <-chan time.Time
	var deadline time.Time
	if inv.server {
		t := time.NewTicker(followPoll)
		defer t.Stop()
		poll, deadline = t.C, time.Now().Add(r.o.listenTimeout)
	}
	var timeout <-chan time.Time
	if r.o.timeout > 0 {
		t := time.NewTimer(r.o.timeout)
		defer t.Stop()
		timeout = t.C
	}
	signals := 0
	for {
		select {
		case <-poll:
			if lab.Listening(inv.port) {
				poll = nil
				fmt.Fprintf(r.env.Stdout, "READY %s %s:%d\n", prog.Name, addr, inv.port)
			} else if time.Now().After(deadline) {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				return 0, fail(ExitGuest, "%s did not listen on port %d within %s", prog.Name, inv.port, r.o.listenTimeout)
			}
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ee.ExitCode(), nil
			}
			if err != nil {
				return 0, fail(ExitGuest, "%s: %v", prog.Name, err)
			}
			return 0, nil
		case sig := <-r.env.Signals:
			signals++
			_ = syscall.Kill(-cmd.Process.Pid, relayed(sig, signals))
		case <-timeout:
			timeout = nil
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return 0, fail(ExitTimeout, "%s ended after --timeout %s", prog.Name, r.o.timeout)
		}
	}
}

// loadHostSiw makes sure the host kernel has siw loaded.
func loadHostSiw() error {
	if _, err := os.Stat("/sys/module/siw"); err == nil {
		return nil
	}
	out, err := exec.Command("modprobe", "siw").CombinedOutput()
	if err == nil {
		return nil
	}
	return fail(ExitGuest, "the host kernel has no siw loaded and modprobe siw failed (%v: %s): "+
		"run `sudo modprobe siw` on the host, or mount its modules (-v /lib/modules:/lib/modules:ro); "+
		"without siw.ko in the host kernel use the default QEMU mode", err, strings.TrimSpace(string(out)))
}

// defaultRouteDev reads the interface of the IPv4 default route from a
// /proc/net/route table.
func defaultRouteDev(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return defaultRouteIn(f)
}

func ipv4Of(netdev string) (string, error) {
	ifi, err := net.InterfaceByName(netdev)
	if err != nil {
		return "", fmt.Errorf("interface %s: %v", netdev, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return "", fmt.Errorf("interface %s: %v", netdev, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("interface %s has no IPv4 address", netdev)
}

var hostBinds = []string{"dev", "sys", "proc"}

// chrootOutput runs a command of the unpacked userspace and returns its
// output.
func chrootOutput(ctx context.Context, root string, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hostLink finds the siw link on netdev, or adds one; remove deletes a link
// that hostLink added.
func (r *runner) hostLink(ctx context.Context, root, netdev string) (line string, remove func(), err error) {
	remove = func() {}
	out, err := chrootOutput(ctx, root, "/usr/bin/rdma", "link", "show")
	if err != nil {
		return "", remove, fail(ExitGuest, "rdma link show: %v: %s", err, out)
	}
	if line = siwLinkLine(out, netdev); line != "" {
		return line, remove, nil
	}
	name := "siw_" + netdev
	if out, err := chrootOutput(ctx, root, "/usr/bin/rdma", "link", "add", name, "type", "siw", "netdev", netdev); err != nil {
		return "", remove, fail(ExitGuest, "rdma link add %s type siw netdev %s: %v: %s", name, netdev, err, out)
	}
	remove = func() {
		if out, err := chrootOutput(context.Background(), root, "/usr/bin/rdma", "link", "delete", name); err != nil {
			r.say("rdma link delete %s: %v: %s", name, err, out)
		}
	}
	if out, err = chrootOutput(ctx, root, "/usr/bin/rdma", "link", "show"); err == nil {
		line = siwLinkLine(out, netdev)
	}
	if line == "" {
		remove()
		return "", func() {}, fail(ExitGuest, "no siw link on %s after rdma link add: %s", netdev, out)
	}
	return line, remove, nil
}
