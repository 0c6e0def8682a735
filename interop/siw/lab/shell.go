package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// Shell boots the guest with a root shell on its serial console instead of
// the agent and returns when QEMU exits (the guest's "poweroff -f", or
// Ctrl-A x). The console and QEMU's monitor (Ctrl-A c) are multiplexed on
// stdin and stdout, which should be a terminal. share is mounted at /mnt in
// the guest. Only Config.Forwards are forwarded (GuestPorts are not: free
// ports picked at random would be of no use to someone at a terminal).
// QEMU is killed when ctx ends.
func Shell(ctx context.Context, cfg Config, share string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg.defaults()
	if err := cfg.checkFiles(); err != nil {
		return err
	}
	if err := os.MkdirAll(share, 0o755); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	cmd := exec.CommandContext(ctx, cfg.QEMU, qemuArgs(cfg, "shell", share, "mon:stdio", cfg.Forwards)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = diesWithParent(nil)
	fmt.Fprintf(cfg.Log, "lab: shell: %s %v\n", cfg.QEMU, cmd.Args[1:])
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("lab: qemu: %w", err)
	}
	return nil
}
