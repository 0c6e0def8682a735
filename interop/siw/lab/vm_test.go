package lab

import (
	"context"
	"fmt"
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
)

// The test binary doubles as a fake QEMU: run with fakeQEMUEnv=1 it checks
// the arguments Boot passes, writes a console line and serves the agent on
// the -virtfs path, as the real guest would. fakeFailsEnv makes the first N
// starts (counted in the file fakeCountEnv) fail like a QEMU that cannot
// bind a forwarded port.
const (
	fakeQEMUEnv  = "LAB_FAKE_QEMU"
	fakeFailsEnv = "LAB_FAKE_QEMU_FAILS"
	fakeCountEnv = "LAB_FAKE_QEMU_COUNT"
	fakeNoFwdEnv = "LAB_FAKE_QEMU_NO_FORWARDS" // set: no hostfwd rule expected
)

func fakeQEMU(args []string) int {
	arg := func(name string) string {
		for i := 0; i+1 < len(args); i++ {
			if args[i] == name {
				return args[i+1]
			}
		}
		return ""
	}
	if n, _ := strconv.Atoi(os.Getenv(fakeFailsEnv)); n > 0 {
		cf := os.Getenv(fakeCountEnv)
		b, _ := os.ReadFile(cf)
		c, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		c++
		_ = os.WriteFile(cf, []byte(strconv.Itoa(c)), 0o644)
		if c <= n {
			fmt.Fprintln(os.Stderr, "qemu-system-x86_64: Could not set up host forwarding rule")
			return 1
		}
	}
	if os.Getenv(fakeNoFwdEnv) == "" && !strings.Contains(arg("-netdev"), "hostfwd=tcp:127.0.0.1:") {
		fmt.Fprintln(os.Stderr, "fake qemu: no forwarding rule", args)
		return 2
	}
	if arg("-smp") != "1" || arg("-accel") != "tcg" {
		fmt.Fprintln(os.Stderr, "fake qemu: unexpected arguments", args)
		return 2
	}
	var share string
	for _, kv := range strings.Split(arg("-virtfs"), ",") {
		if v, ok := strings.CutPrefix(kv, "path="); ok {
			share = v
		}
	}
	if c, ok := strings.CutPrefix(arg("-serial"), "file:"); ok {
		_ = os.WriteFile(c, []byte("fake console\n"), 0o644)
	}
	if _, err := os.Stat(filepath.Join(share, agentBinary)); err != nil {
		fmt.Fprintln(os.Stderr, "fake qemu: no agent in the share:", err)
		return 3
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := ServeAgent(ctx, share, AgentOptions{Poll: 5 * time.Millisecond}); err != nil {
		return 4
	}
	return 0
}

func fakeConfig(t *testing.T, fails int) Config {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for _, n := range []string{"vmlinuz", "initrd", "agent"} {
		files[n] = filepath.Join(dir, n)
		require.NoError(t, os.WriteFile(files[n], []byte(n), 0o644))
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	t.Setenv(fakeQEMUEnv, "1")
	t.Setenv(fakeFailsEnv, strconv.Itoa(fails))
	t.Setenv(fakeCountEnv, filepath.Join(dir, "count"))
	work := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	return Config{Kernel: files["vmlinuz"], Initrd: files["initrd"], Agent: files["agent"], QEMU: exe,
		WorkDir: work, BootTimeout: 20 * time.Second, BootAttempts: 3, OutDir: filepath.Join(dir, "out")}
}

func TestBootRetriesThenServesJobsAndShutsDown(t *testing.T) {
	cfg := fakeConfig(t, 1)
	ctx := context.Background()
	vm, err := Boot(ctx, cfg)
	require.NoError(t, err)
	b, _ := os.ReadFile(os.Getenv(fakeCountEnv))
	assert.Equal(t, "2", string(b), "one failed start, one good one")

	ports := vm.Ports()
	require.Len(t, ports, len(DefaultGuestPorts))
	seen := map[int]bool{}
	for _, gp := range DefaultGuestPorts {
		hp, err := vm.HostPort(gp)
		require.NoError(t, err)
		assert.False(t, seen[hp])
		seen[hp] = true
		addr, err := vm.HostAddr(gp)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", hp), addr)
	}
	_, err = vm.HostPort(9)
	require.Error(t, err)
	assert.Equal(t, "fake console\n", vm.Console())

	res, err := vm.Run(ctx, 10*time.Second, "hello", "echo hello")
	require.NoError(t, err)
	assert.Equal(t, "hello\n", res.Stdout)

	dir := vm.Dir()
	require.NoError(t, vm.Shutdown(ctx))
	select {
	case <-vm.Exited():
	default:
		t.Fatal("QEMU still running after Shutdown")
	}
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "work dir left behind")
	require.NoError(t, vm.Shutdown(ctx), "a second Shutdown is harmless")
	ents, _ := os.ReadDir(cfg.WorkDir)
	assert.Empty(t, ents, "failed attempts leave no folders")
}

func TestBootGivesUpAfterItsAttempts(t *testing.T) {
	cfg := fakeConfig(t, 5)
	cfg.BootAttempts = 2
	_, err := Boot(context.Background(), cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "attempt 2")
	assert.Contains(t, err.Error(), "Could not set up host forwarding rule")
	b, _ := os.ReadFile(os.Getenv(fakeCountEnv))
	assert.Equal(t, "2", string(b))
}

func TestBootKillsQEMUWhenTheContextEnds(t *testing.T) {
	cfg := fakeConfig(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	vm, err := Boot(ctx, cfg)
	require.NoError(t, err)
	cancel()
	select {
	case <-vm.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("QEMU survived its context")
	}
	// Waits fail fast once the guest is gone.
	_, err = vm.Run(context.Background(), time.Minute, "late", "true")
	require.ErrorIs(t, err, ErrGuestDown)
	require.NoError(t, vm.Shutdown(context.Background()))
}

func TestBootChecksItsInputs(t *testing.T) {
	cfg := fakeConfig(t, 0)
	cfg.Kernel = filepath.Join(t.TempDir(), "missing")
	_, err := Boot(context.Background(), cfg)
	require.Error(t, err)
}

// failedTB is a test that reports failure, so Track's failure path runs.
type failedTB struct {
	testing.TB
	cleanups []func()
}

func (f *failedTB) Cleanup(fn func())   { f.cleanups = append(f.cleanups, fn) }
func (f *failedTB) Failed() bool        { return true }
func (f *failedTB) Name() string        { return "TestSome/sub case" }
func (f *failedTB) Logf(string, ...any) {}
func (f *failedTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestTrackKeepsJobsOfAFailedTestAndStopsThem(t *testing.T) {
	cfg := fakeConfig(t, 0)
	ctx := context.Background()
	vm, err := Boot(ctx, cfg)
	require.NoError(t, err)
	defer vm.Shutdown(ctx)

	before, err := vm.Run(ctx, 10*time.Second, "before", "echo before")
	require.NoError(t, err)
	ft := &failedTB{TB: t}
	vm.Track(ft)
	res, err := vm.Run(ctx, 10*time.Second, "mine", "echo mine; echo oops >&2; exit 4")
	require.NoError(t, err)
	long, err := vm.Start(ctx, "long", "sleep 30", 0)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(vm.Share(), outDir, "x.pcap"), []byte("pcap"), 0o644))
	vm.keep(filepath.Join(vm.Share(), outDir, "x.pcap"))
	ft.runCleanups()

	assert.True(t, long.Exited(), "Track stops jobs still running")
	dst := filepath.Join(cfg.OutDir, "TestSome_sub_case")
	out, err := os.ReadFile(filepath.Join(dst, res.ID+".out"))
	require.NoError(t, err)
	assert.Equal(t, "mine\n", string(out))
	errb, err := os.ReadFile(filepath.Join(dst, res.ID+".err"))
	require.NoError(t, err)
	assert.Equal(t, "oops\n", string(errb))
	assert.FileExists(t, filepath.Join(dst, res.ID+".exit"))
	assert.FileExists(t, filepath.Join(dst, long.ID()+".exit"))
	assert.FileExists(t, filepath.Join(dst, "x.pcap"))
	assert.FileExists(t, filepath.Join(dst, "console.log"))
	assert.NoFileExists(t, filepath.Join(dst, before.ID+".out"), "jobs from before Track are not this test's")
}

func TestBootForwardsFixedPortsOnly(t *testing.T) {
	cfg := fakeConfig(t, 0)
	cfg.Forwards = []Forward{{Host: 40001, Guest: 7174}}
	ctx := context.Background()
	vm, err := Boot(ctx, cfg)
	require.NoError(t, err)
	defer vm.Shutdown(ctx)
	assert.Equal(t, map[int]int{7174: 40001}, vm.Ports())
	rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(rel)), vm.Kernel(), "the kernel the agent reported")
	_, err = vm.HostPort(7175)
	require.Error(t, err, "GuestPorts are not forwarded when Forwards is set")
}

func TestBootWithoutForwards(t *testing.T) {
	cfg := fakeConfig(t, 0)
	t.Setenv(fakeNoFwdEnv, "1")
	cfg.Forwards = []Forward{}
	ctx := context.Background()
	vm, err := Boot(ctx, cfg)
	require.NoError(t, err)
	defer vm.Shutdown(ctx)
	assert.Empty(t, vm.Ports())
}

func TestBootDoesNotRetryATakenFixedPort(t *testing.T) {
	cfg := fakeConfig(t, 5)
	cfg.Forwards = []Forward{{Host: 40002, Guest: 7174}}
	_, err := Boot(context.Background(), cfg)
	require.ErrorIs(t, err, ErrHostPortInUse)
	b, _ := os.ReadFile(os.Getenv(fakeCountEnv))
	assert.Equal(t, "1", string(b), "one attempt: retrying cannot free a fixed port")
}

func TestQEMUArgsForwardToTheGuestAddress(t *testing.T) {
	cfg := Config{Kernel: "k", Initrd: "i", ExtraAppend: "labsiw=peer_to_peer=1"}
	cfg.defaults()
	args := qemuArgs(cfg, "shell", "/s", "mon:stdio", []Forward{{Host: 1, Guest: 2}, {Host: 3, Guest: 4}})
	joined := strings.Join(args, " ")
	assert.Contains(t, joined, "-netdev user,id=n0,ipv6=off,hostfwd=tcp:127.0.0.1:1-10.0.2.15:2,hostfwd=tcp:127.0.0.1:3-10.0.2.15:4 ")
	assert.Contains(t, joined, " lab=shell labsiw=peer_to_peer=1 ")
	assert.Contains(t, joined, "-serial mon:stdio")
	assert.Contains(t, joined, "path=/s,mount_tag=share")
}

// The pmem range lies right above the guest's RAM, and QEMU backs both.
func TestQEMUArgsPmemAboveRAM(t *testing.T) {
	cfg := Config{Kernel: "k", Initrd: "i", MemoryMB: 1024, PmemMB: 256}
	cfg.defaults()
	joined := strings.Join(qemuArgs(cfg, "agent", "/s", "file:c", nil), " ")
	assert.Contains(t, joined, " -m 1282 ", "2 MiB above the range for the firmware's tables")
	assert.Contains(t, joined, " lab=agent memmap=256M!1024M")

	cfg.PmemMB = 0
	joined = strings.Join(qemuArgs(cfg, "agent", "/s", "file:c", nil), " ")
	assert.Contains(t, joined, " -m 1024 ")
	assert.NotContains(t, joined, "memmap=")
}
