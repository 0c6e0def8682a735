//go:build linux || darwin || freebsd

package pmemsink

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The mode decision for every kind of file, with the MAP_SYNC probe and
// the CPU's instructions stubbed: the branches a DAX machine takes.
func TestChoose(t *testing.T) {
	clwb := []flusher{{name: "clwb", line: 64}}
	ok := func() error { return nil }
	refused := func() error { return syscall.EOPNOTSUPP }
	notCalled := func() error { t.Fatal("probe called"); return nil }
	devdax := facts{devDAX: true, backing: "device-dax", flushers: clwb}
	file := facts{backing: "file", flushers: clwb}
	tmpfs := facts{backing: "tmpfs", volatile: true, flushers: clwb}

	cases := []struct {
		name    string
		req     Mode
		f       facts
		probe   func() error
		mode    Mode
		durable bool
		backing string
		err     string
	}{
		{"devdax auto", ModeAuto, devdax, notCalled, ModeDAX, true, "device-dax", ""},
		{"devdax dax", ModeDAX, devdax, notCalled, ModeDAX, true, "device-dax", ""},
		{"devdax msync", ModeMsync, devdax, notCalled, 0, false, "", "msync has no effect on device DAX"},
		{"devdax without an instruction", ModeAuto, facts{devDAX: true, backing: "device-dax"}, notCalled, 0, false, "", "no cache-line write-back"},
		{"devdax volatile", ModeVolatile, devdax, notCalled, ModeVolatile, false, "device-dax", ""},
		{"fsdax auto", ModeAuto, file, ok, ModeDAX, true, "fsdax", ""},
		{"fsdax dax", ModeDAX, file, ok, ModeDAX, true, "fsdax", ""},
		{"fsdax msync", ModeMsync, file, notCalled, ModeMsync, true, "file", ""},
		{"file auto", ModeAuto, file, refused, ModeMsync, true, "file", ""},
		{"file dax", ModeDAX, file, refused, 0, false, "", "mmap with MAP_SYNC failed: operation not supported"},
		{"fsdax on arm64 without DC CVAP", ModeAuto, facts{backing: "file"}, notCalled, ModeMsync, true, "file", ""},
		{"dax without an instruction", ModeDAX, facts{backing: "file"}, notCalled, 0, false, "", "no cache-line write-back"},
		{"tmpfs auto", ModeAuto, tmpfs, notCalled, ModeVolatile, false, "tmpfs", ""},
		{"tmpfs msync", ModeMsync, tmpfs, notCalled, ModeMsync, false, "tmpfs", ""},
		{"tmpfs dax", ModeDAX, tmpfs, refused, 0, false, "", "tmpfs is not DAX"},
		{"tmpfs that claims MAP_SYNC", ModeDAX, tmpfs, ok, 0, false, "", "refusing to call it persistent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := choose(tc.req, tc.f, tc.probe)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.mode, c.mode)
			require.Equal(t, tc.durable, c.durable)
			require.Equal(t, tc.backing, c.backing)
			if c.mode == ModeDAX {
				require.Equal(t, persistLines, c.kind)
				require.Equal(t, "clwb", c.fl.name)
			}
		})
	}
	_, err := choose(ModeDAX, facts{backing: "file"}, notCalled)
	require.True(t, errors.Is(err, ErrUnsupported))
}

// Test overrides are never durable, whatever the file.
func TestTestChoice_NeverDurable(t *testing.T) {
	fl := cpuFlushers()
	if len(fl) == 0 {
		t.Skip("no cache-line write-back instruction")
	}
	p := tpath(diskDir(t), "f")
	s := openT(t, p, 1<<16, withTestFlush(fl[0].name))
	require.False(t, s.Durable())
	require.Equal(t, "simulated", s.Info().Backing)
	require.Equal(t, ModeDAX, s.Info().Mode)

	_, err := Open(tpath(diskDir(t), "g"), 1<<16, withTestFlush("no-such-instruction"))
	require.ErrorIs(t, err, ErrUnsupported)
}
