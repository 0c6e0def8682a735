package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// VM is a running QEMU guest with the siw peer and its agent.
type VM struct {
	*Guest
	cfg     Config
	dir     string
	ports   map[int]int
	kernel  string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	stop    sync.Once
	stopErr error
}

// ErrHostPortInUse is wrapped by the error of a boot whose QEMU could not
// bind a forwarded host port.
var ErrHostPortInUse = errors.New("a forwarded host port is in use")

// Boot starts QEMU and waits until the guest agent serves. A failed attempt
// (QEMU exits, cannot bind a forwarded port, or the agent is not up within
// BootTimeout) is retried up to BootAttempts times; only boot is retried,
// and not when a fixed port of Config.Forwards is taken.
// QEMU is killed when ctx ends, so a cancelled test never leaves it running;
// call Shutdown when done.
func Boot(ctx context.Context, cfg Config) (*VM, error) {
	cfg.defaults()
	if err := cfg.checkFiles(); err != nil {
		return nil, err
	}
	var errs []error
	for attempt := 1; attempt <= cfg.BootAttempts; attempt++ {
		vm, err := bootOnce(ctx, cfg, attempt)
		if err == nil {
			return vm, nil
		}
		fmt.Fprintf(cfg.Log, "lab: boot attempt %d: %v\n", attempt, err)
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if ctx.Err() != nil || (cfg.Forwards != nil && errors.Is(err, ErrHostPortInUse)) {
			break
		}
	}
	return nil, fmt.Errorf("lab: boot failed: %w", errors.Join(errs...))
}

func (c *Config) checkFiles() error {
	for _, f := range []string{c.Kernel, c.Initrd, c.Agent} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	return nil
}

// freePorts picks n distinct free TCP ports on 127.0.0.1. Another process
// can take one before QEMU binds it; QEMU then fails and Boot retries.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// forwards returns the rules of one boot: Config.Forwards, or GuestPorts
// from free host ports.
func (c *Config) forwards() ([]Forward, error) {
	if c.Forwards != nil {
		return append([]Forward{}, c.Forwards...), nil
	}
	hp, err := freePorts(len(c.GuestPorts))
	if err != nil {
		return nil, err
	}
	fw := make([]Forward, len(hp))
	for i, gp := range c.GuestPorts {
		fw[i] = Forward{Host: hp[i], Guest: gp}
	}
	return fw, nil
}

// prepareShare lays out the share with the agent in it.
func prepareShare(share string, cfg Config) error {
	for _, d := range []string{cmdDir, resDir, outDir} {
		if err := os.MkdirAll(filepath.Join(share, d), 0o755); err != nil {
			return err
		}
	}
	return copyFile(cfg.Agent, filepath.Join(share, agentBinary), 0o755)
}

// qemuArgs is the QEMU command line of a guest in mode (the kernel's lab=
// argument: agent or shell) with the share mounted at /mnt and the serial
// console on serial (a QEMU -serial backend).
func qemuArgs(cfg Config, mode, share, serial string, fw []Forward) []string {
	var nd strings.Builder
	nd.WriteString("user,id=n0,ipv6=off")
	for _, f := range fw {
		fmt.Fprintf(&nd, ",hostfwd=tcp:127.0.0.1:%d-%s:%d", f.Host, GuestIP, f.Guest)
	}
	// The guest keeps the TSC as its clock source: with tsc=unstable it
	// falls back to the emulated HPET, whose slow, jittery reads made
	// perftest's CPU-clock calibration (gettimeofday against rdtsc) fail
	// in 24 of 30 tries; on the TSC it failed in none.
	appendArgs := "console=ttyS0 panic=-1 mitigations=off no_timer_check loglevel=4 lab=" + mode
	mem := cfg.MemoryMB
	if cfg.PmemMB > 0 {
		// memmap=nn!ss marks the range type 12 in the firmware's memory
		// map; QEMU must back it with memory, hence the larger -m. The
		// firmware reserves the top 128 KiB of RAM for its tables, so
		// the range stops pmemFirmwareMB short of it: a range that
		// overlaps them is split and, no longer 2 MiB-aligned, cannot be
		// mapped ("misaligned, unable to map").
		appendArgs += fmt.Sprintf(" memmap=%dM!%dM", cfg.PmemMB, cfg.MemoryMB)
		mem += cfg.PmemMB + pmemFirmwareMB
	}
	if cfg.ExtraAppend != "" {
		appendArgs += " " + cfg.ExtraAppend
	}
	return []string{
		"-accel", "tcg", "-cpu", "max", "-smp", fmt.Sprint(cfg.CPUs), "-m", fmt.Sprint(mem),
		"-kernel", cfg.Kernel, "-initrd", cfg.Initrd, "-append", appendArgs,
		"-no-reboot", "-nodefaults", "-display", "none", "-vga", "none",
		"-netdev", nd.String(),
		"-device", "virtio-net-pci,netdev=n0",
		"-virtfs", "local,path=" + share + ",mount_tag=share,security_model=none,id=fs0",
		"-serial", serial,
	}
}

// pmemFirmwareMB is the RAM above the pmem range (Config.PmemMB), where
// SeaBIOS keeps its tables.
const pmemFirmwareMB = 2

// hostFwdFailure is how QEMU reports a hostfwd rule it cannot bind.
const hostFwdFailure = "Could not set up host forwarding rule"

func bootOnce(ctx context.Context, cfg Config, attempt int) (*VM, error) {
	dir, err := os.MkdirTemp(cfg.WorkDir, "siwlab-")
	if err != nil {
		return nil, err
	}
	share := filepath.Join(dir, "share")
	var fw []Forward
	if err = prepareShare(share, cfg); err == nil {
		fw, err = cfg.forwards()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	vm := &VM{cfg: cfg, dir: dir, ports: map[int]int{}, exited: make(chan struct{})}
	for _, f := range fw {
		vm.ports[f.Guest] = f.Host
	}
	args := append(qemuArgs(cfg, "agent", share, "file:"+vm.ConsoleLog(), fw),
		"-monitor", "none", "-pidfile", filepath.Join(dir, "qemu.pid"))
	qlog, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer qlog.Close()
	vm.cmd = exec.Command(cfg.QEMU, args...)
	vm.cmd.Stdout, vm.cmd.Stderr = qlog, qlog
	// If the test process dies, the kernel kills QEMU with it.
	vm.cmd.SysProcAttr = diesWithParent(groupAttr())
	fmt.Fprintf(cfg.Log, "lab: boot %d: %s %s\n", attempt, cfg.QEMU, strings.Join(args, " "))
	if err := vm.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		vm.waitErr = vm.cmd.Wait()
		close(vm.exited)
	}()
	go func() {
		select {
		case <-ctx.Done():
			vm.Kill()
		case <-vm.exited:
		}
	}()
	vm.Guest = NewGuest(share, vm.alive)
	start := time.Now()
	err = vm.Guest.waitFor(ctx, cfg.BootTimeout, func() (bool, error) {
		if b, err := os.ReadFile(filepath.Join(share, "init.failed")); err == nil {
			return false, fmt.Errorf("guest init failed: %s", strings.TrimSpace(string(b)))
		}
		return fileExists(filepath.Join(share, agentReady)), nil
	})
	if err != nil {
		vm.Kill()
		<-vm.exited
		q, _ := os.ReadFile(filepath.Join(dir, "qemu.log"))
		if bytes.Contains(q, []byte(hostFwdFailure)) {
			err = fmt.Errorf("%w: %w", ErrHostPortInUse, err)
		}
		err = fmt.Errorf("%w\nqemu: %s\nconsole (%s):\n%s", err, strings.TrimSpace(string(q)), vm.ConsoleLog(), tail(vm.Console(), 3000))
		if !cfg.KeepWorkDir {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	var ri readyInfo
	_ = readJSON(filepath.Join(share, agentReady), &ri)
	vm.kernel = ri.Kernel
	fmt.Fprintf(cfg.Log, "lab: guest %s up after %s; ports %v\n", ri.Kernel, time.Since(start).Round(time.Millisecond), vm.ports)
	return vm, nil
}

// Kernel returns the guest kernel's release (uname -r), as the agent
// reported it at boot.
func (vm *VM) Kernel() string { return vm.kernel }

func (vm *VM) alive() error {
	select {
	case <-vm.exited:
		if vm.waitErr != nil {
			return fmt.Errorf("qemu exited: %v", vm.waitErr)
		}
		return errors.New("qemu exited")
	default:
		return nil
	}
}

// HostPort returns the 127.0.0.1 port that QEMU forwards to guestPort.
func (vm *VM) HostPort(guestPort int) (int, error) {
	p, ok := vm.ports[guestPort]
	if !ok {
		return 0, fmt.Errorf("lab: guest port %d is not forwarded (forwarded: %v)", guestPort, vm.cfg.GuestPorts)
	}
	return p, nil
}

// HostAddr returns "127.0.0.1:<port>" for the host port that forwards to
// guestPort.
func (vm *VM) HostAddr(guestPort int) (string, error) {
	p, err := vm.HostPort(guestPort)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p), nil
}

// Ports returns the forwarded ports, guest port → host port.
func (vm *VM) Ports() map[int]int {
	m := make(map[int]int, len(vm.ports))
	for k, v := range vm.ports {
		m[k] = v
	}
	return m
}

// Dir returns the per-boot directory (share, console log, QEMU log).
func (vm *VM) Dir() string { return vm.dir }

// ConsoleLog returns the path of the guest's serial console log.
func (vm *VM) ConsoleLog() string { return filepath.Join(vm.dir, "console.log") }

// Console returns the serial console output so far.
func (vm *VM) Console() string { b, _ := os.ReadFile(vm.ConsoleLog()); return string(b) }

// Exited is closed when QEMU has exited.
func (vm *VM) Exited() <-chan struct{} { return vm.exited }

// Kill stops QEMU at once.
func (vm *VM) Kill() {
	if vm.cmd != nil && vm.cmd.Process != nil {
		_ = vm.cmd.Process.Kill()
	}
}

// Shutdown asks the agent to power the guest off, waits up to 30 seconds
// (or until ctx ends) for QEMU to exit, then kills it. Unless KeepWorkDir
// is set, the per-boot directory is removed. Safe to call more than once.
func (vm *VM) Shutdown(ctx context.Context) error {
	vm.stop.Do(func() {
		if vm.alive() == nil {
			_ = writeFlag(filepath.Join(vm.share, cmdDir, poweroffCmd), nil)
			t := time.NewTimer(30 * time.Second)
			select {
			case <-vm.exited:
			case <-t.C:
				vm.stopErr = errors.New("lab: guest did not power off within 30s; killed QEMU")
			case <-ctx.Done():
				vm.stopErr = ctx.Err()
			}
			t.Stop()
			vm.Kill()
			<-vm.exited
		}
		if !vm.cfg.KeepWorkDir {
			if err := os.RemoveAll(vm.dir); err != nil && vm.stopErr == nil {
				vm.stopErr = err
			}
		}
	})
	return vm.stopErr
}

// SaveArtifacts copies the console and QEMU logs, the agent's job files
// (res/) and the share's out/ folder into dst.
func (vm *VM) SaveArtifacts(dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, f := range []string{vm.ConsoleLog(), filepath.Join(vm.dir, "qemu.log")} {
		if fileExists(f) {
			errs = append(errs, copyFile(f, filepath.Join(dst, filepath.Base(f)), 0o644))
		}
	}
	for _, d := range []string{resDir, outDir} {
		ents, _ := os.ReadDir(filepath.Join(vm.share, d))
		for _, e := range ents {
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
				errs = append(errs, copyFile(filepath.Join(vm.share, d, e.Name()), filepath.Join(dst, d, e.Name()), 0o644))
			}
		}
	}
	return errors.Join(errs...)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
