// Command siw-peer is the entry point of the iwarp-go/siw-peer image (see
// package siwpeer and interop/siw/README.md):
//
//	docker run --rm --network host iwarp-go/siw-peer rping -s -p 7174
//
// The image description (kernel, initramfs, guest agent) is read from
// IWARP_SIW_ENV, else lab.env next to this executable, else the interop
// suite's cache (interop/siw/build.sh's current.env), so the same binary
// also runs outside the image. IWARP_SIW_QEMU names another QEMU.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
	"github.com/iwarp-go/iwarp-go/interop/siw/siwpeer"
)

func main() {
	sigs := make(chan os.Signal, 2)
	// PID 1 in a container gets no default signal handling: without this,
	// docker stop would wait for its timeout and then kill everything.
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	os.Exit(siwpeer.Main(context.Background(), os.Args[1:], siwpeer.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Signals: sigs,
		LabEnv: labEnv(), QEMU: os.Getenv("IWARP_SIW_QEMU"), WorkDir: os.Getenv("IWARP_SIW_WORKDIR"),
	}))
}

func labEnv() string {
	if p := os.Getenv("IWARP_SIW_ENV"); p != "" {
		return p
	}
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), "lab.env"); fileExists(p) {
			return p
		}
	}
	return lab.DefaultEnvFile()
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
