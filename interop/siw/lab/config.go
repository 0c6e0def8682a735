package lab

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultGuestPorts are the guest TCP ports forwarded from the host: rping
// (7174), the C test program (7175), a spare (7176) and perftest (18515).
var DefaultGuestPorts = []int{7174, 7175, 7176, 18515}

// Addresses of QEMU's user networking as the guest sees them.
const (
	GuestIP = "10.0.2.15" // the guest's eth0, which siw0 is on
	HostIP  = "10.0.2.2"  // the host's 127.0.0.1, as the guest reaches it
)

// Config describes one VM.
type Config struct {
	Kernel string // bzImage (vmlinuz)
	Initrd string // initramfs built by build.sh
	Agent  string // iwlab-agent executable, copied into the share at boot

	QEMU     string // default "qemu-system-x86_64"
	MemoryMB int    // the guest's RAM; default 1024
	// PmemMB, if not 0, gives the guest a legacy persistent-memory range of
	// this size right above its RAM: QEMU gets MemoryMB+PmemMB+2 MiB of
	// memory (the firmware's tables take the top) and the kernel
	// memmap=<PmemMB>M!<MemoryMB>M, which makes the range an e820
	// type-12 one. Loading nd_e820 and nd_pmem in the guest makes it
	// /dev/pmem0, which supports DAX. It is emulated RAM: nothing on it
	// survives the guest.
	PmemMB int
	// CPUs defaults to 1: under TCG each vCPU takes a host core, and the
	// host-side peer needs one.
	CPUs int
	// GuestPorts are forwarded from free 127.0.0.1 ports chosen at boot
	// (see VM.HostPort). Default DefaultGuestPorts.
	GuestPorts []int
	// Forwards, if not nil, replaces GuestPorts: exactly these rules, each
	// from a fixed host port (an empty, non-nil slice forwards nothing). A
	// host port that QEMU cannot bind fails Boot at once with an error
	// wrapping ErrHostPortInUse: retrying would not free it.
	Forwards []Forward

	WorkDir     string // parent of the per-boot directory; default os.TempDir()
	KeepWorkDir bool   // keep the per-boot directory after Shutdown
	// OutDir receives the logs and captures of failed scenarios (see
	// VM.Track); empty disables that.
	OutDir string

	BootTimeout  time.Duration // per attempt; default 3 minutes
	BootAttempts int           // default 3
	ExtraAppend  string        // more kernel arguments
	Log          io.Writer     // progress lines; nil discards

	// SiwKnobs names the module parameters of the knobs build of siw.ko
	// (SIW_KNOBS in the file build.sh writes); informational, empty if
	// unknown.
	SiwKnobs []string
}

// Forward is one QEMU forwarding rule: TCP connections to 127.0.0.1:Host
// on the host go to the guest's port Guest on 10.0.2.15.
type Forward struct{ Host, Guest int }

func (c *Config) defaults() {
	if c.QEMU == "" {
		c.QEMU = "qemu-system-x86_64"
	}
	if c.MemoryMB == 0 {
		c.MemoryMB = 1024
	}
	if c.CPUs == 0 {
		c.CPUs = 1
	}
	if len(c.GuestPorts) == 0 {
		c.GuestPorts = DefaultGuestPorts
	}
	if c.BootTimeout == 0 {
		c.BootTimeout = 3 * time.Minute
	}
	if c.BootAttempts == 0 {
		c.BootAttempts = 3
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// DefaultEnvFile returns where build.sh records the current image:
// ${IWARP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/iwarp-go}/siw-lab/current.env.
func DefaultEnvFile() string {
	root := os.Getenv("IWARP_CACHE")
	if root == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		root = filepath.Join(cache, "iwarp-go")
	}
	return filepath.Join(root, "siw-lab", "current.env")
}

// ConfigFromEnv builds a Config from the file build.sh wrote
// (IWARP_SIW_ENV, else DefaultEnvFile) and these variables:
// IWARP_SIW_OUT (OutDir, default "out"), IWARP_SIW_WORKDIR (WorkDir),
// IWARP_SIW_KEEP=1 (KeepWorkDir).
func ConfigFromEnv() (Config, error) {
	path := os.Getenv("IWARP_SIW_ENV")
	if path == "" {
		path = DefaultEnvFile()
	}
	c, err := ConfigFromFile(path)
	if err != nil {
		return Config{}, err
	}
	c.OutDir = os.Getenv("IWARP_SIW_OUT")
	if c.OutDir == "" {
		c.OutDir = "out"
	}
	c.WorkDir = os.Getenv("IWARP_SIW_WORKDIR")
	c.KeepWorkDir = os.Getenv("IWARP_SIW_KEEP") == "1"
	return c, nil
}

// ConfigFromFile builds a Config from a file in the format build.sh
// writes (current.env): the image files, which must exist, and the knobs.
func ConfigFromFile(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("lab: %w (run interop/siw/run.sh build first)", err)
	}
	defer f.Close()
	vars, err := parseEnvFile(f)
	if err != nil {
		return Config{}, fmt.Errorf("lab: %s: %w", path, err)
	}
	c := Config{Kernel: vars["SIW_KERNEL"], Initrd: vars["SIW_INITRD"], Agent: vars["SIW_AGENT"]}
	if k := vars["SIW_KNOBS"]; k != "" {
		c.SiwKnobs = strings.Split(k, ",")
	}
	for k, v := range map[string]string{"SIW_KERNEL": c.Kernel, "SIW_INITRD": c.Initrd, "SIW_AGENT": c.Agent} {
		if v == "" {
			return Config{}, fmt.Errorf("lab: %s: %s is not set", path, k)
		}
		if _, err := os.Stat(v); err != nil {
			return Config{}, fmt.Errorf("lab: %s: %s: %w (run interop/siw/run.sh build)", path, k, err)
		}
	}
	return c, nil
}

// parseEnvFile reads KEY=VALUE lines; # starts a comment line.
func parseEnvFile(r io.Reader) (map[string]string, error) {
	m := map[string]string{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d: not KEY=VALUE", n)
		}
		m[k] = v
	}
	return m, sc.Err()
}
