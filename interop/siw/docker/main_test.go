//go:build interopdocker

// Package docker_test runs a subset of the interop scenarios through the
// iwarp-go/siw-peer image: iwarp-peer on the host (driven by its command
// line only) against siw in a container, as a user of the image would.
// `make interop-docker` builds the image and runs them; see test.sh.
package docker_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// image is the image under test; peerBin the iwarp-peer built for the run.
var image, peerBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	repo := os.Getenv("IWARP_SIW_IMAGE")
	if repo == "" {
		repo = "iwarp-go/siw-peer"
	}
	image = repo + ":latest"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f", "{{.Id}}", image).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "no image %s (make siw-image builds it): %v\n%s", image, err, out)
		return 2
	}
	dir, err := os.MkdirTemp("", "iwarp-peer-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	peerBin = filepath.Join(dir, "iwarp-peer")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", peerBin, "github.com/iwarp-go/iwarp-go/cmd/iwarp-peer").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building iwarp-peer: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
