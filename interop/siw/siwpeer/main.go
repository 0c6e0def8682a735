package siwpeer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Env is what Main takes from its surroundings.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Signals are forwarded to the guest program (a second one kills it);
	// nil means none arrive.
	Signals <-chan os.Signal
	// LabEnv is the image description in the format of build.sh's
	// current.env: kernel, initramfs, agent, knob names.
	LabEnv  string
	QEMU    string // "" means qemu-system-x86_64
	WorkDir string // parent of the per-boot folder; "" means os.TempDir()
}

// options are the entry point's own flags, given before the command.
type options struct {
	siw           []string
	memoryMB      int
	cpus          int
	bootTimeout   time.Duration
	listenTimeout time.Duration
	timeout       time.Duration
	share         string
	hostSiw       bool
	netdev        string
	verbose       bool
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func parseOptions(args []string, stderr io.Writer) (*options, []string, error) {
	o := &options{}
	fs := flag.NewFlagSet("siw-peer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var((*stringList)(&o.siw), "siw", "")
	fs.IntVar(&o.memoryMB, "memory", 1024, "")
	fs.IntVar(&o.cpus, "cpus", 1, "")
	fs.DurationVar(&o.bootTimeout, "boot-timeout", 3*time.Minute, "")
	fs.DurationVar(&o.listenTimeout, "listen-timeout", time.Minute, "")
	fs.DurationVar(&o.timeout, "timeout", 0, "")
	fs.StringVar(&o.share, "share", "", "")
	fs.BoolVar(&o.hostSiw, "host-siw", false, "")
	fs.StringVar(&o.netdev, "netdev", "", "")
	fs.BoolVar(&o.verbose, "verbose", false, "")
	fs.BoolVar(&o.verbose, "v", false, "")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	switch {
	case o.memoryMB < 64:
		return nil, nil, fmt.Errorf("--memory %d: at least 64 (MB)", o.memoryMB)
	case o.cpus < 1:
		return nil, nil, fmt.Errorf("--cpus %d: at least 1", o.cpus)
	case o.bootTimeout <= 0 || o.listenTimeout <= 0 || o.timeout < 0:
		return nil, nil, errors.New("timeouts must be positive")
	}
	return o, fs.Args(), nil
}

// Main runs the entry point with the container's arguments (without the
// program name) and returns the exit status.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	code, err := run(ctx, args, env)
	if err != nil {
		var f *failure
		if !errors.As(err, &f) {
			f = &failure{code: ExitGuest, msg: err.Error()}
		}
		fmt.Fprintf(env.Stderr, "siw-peer: %s\n", f.msg)
		return f.code
	}
	return code
}

func run(ctx context.Context, args []string, env Env) (int, error) {
	o, rest, err := parseOptions(args, env.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		usage(env.Stdout)
		return 0, nil
	}
	if err != nil {
		return 0, fail(ExitUsage, "%v (siw-peer help lists the options)", err)
	}
	if len(rest) == 0 {
		usage(env.Stderr)
		return ExitUsage, nil
	}
	name, pargs := rest[0], rest[1:]
	if name == "help" {
		usage(env.Stdout)
		return 0, nil
	}
	r := &runner{o: o, env: env}
	if name == shellCommand {
		if len(pargs) > 0 {
			return 0, fail(ExitUsage, "shell takes no arguments")
		}
		if o.hostSiw {
			return r.hostSiw(ctx, Program{Name: "sh"}, &invocation{})
		}
		return r.shell(ctx)
	}
	prog, ok := lookup(name)
	if !ok {
		return 0, fail(ExitUsage, "unknown command %q; commands: %s", name, commandNames())
	}
	inv, err := prog.parse(pargs)
	if err != nil {
		return 0, fail(ExitUsage, "%v", err)
	}
	if o.hostSiw {
		return r.hostSiw(ctx, prog, inv)
	}
	return r.guest(ctx, prog, inv)
}

// runner is one run of the entry point.
type runner struct {
	o   *options
	env Env
}

func (r *runner) logw() io.Writer {
	if r.o.verbose {
		return r.env.Stderr
	}
	return nil
}

func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.env.Stderr, "siw-peer: "+format+"\n", args...)
}
