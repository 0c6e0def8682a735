//go:build windows

package pmemsink

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpen_WindowsUnsupported(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "f"), 4096)
	require.ErrorIs(t, err, ErrUnsupported)
}
