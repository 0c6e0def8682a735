//go:build tools

// Package tools pins the module's dependencies before the packages that use
// them exist, so that go.mod and go.sum stay complete.
package tools

import (
	_ "github.com/google/gopacket/pcapgo"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sys/unix"
)
