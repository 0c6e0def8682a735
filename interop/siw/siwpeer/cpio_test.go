package siwpeer

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newcWriter writes the entries of a newc archive, as cpio -o -H newc does.
type newcWriter struct{ bytes.Buffer }

func (w *newcWriter) entry(name string, mode, ino, nlink uint32, data string) {
	fmt.Fprintf(w, "%s%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		cpioMagic, ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	w.WriteString(name + "\x00")
	w.Write(make([]byte, pad4(uint64(cpioHeader+len(name)+1))))
	w.WriteString(data)
	w.Write(make([]byte, pad4(uint64(len(data)))))
}

func TestExtractCpio(t *testing.T) {
	var w newcWriter
	w.entry(".", 0o040755, 1, 2, "")
	w.entry("bin", 0o040755, 2, 2, "")
	w.entry("bin/busybox", 0o100755, 3, 1, "\x7fELF…")
	w.entry("bin/sh", 0o120777, 4, 1, "busybox")
	w.entry("etc/passwd", 0o100644, 5, 1, "root:x:0:0::/root:/bin/sh\n")
	w.entry("lib/a", 0o100644, 6, 2, "") // hard link, data with the last name
	w.entry("lib/b", 0o100644, 6, 2, "shared")
	w.entry("dev/console", 0o020600, 7, 1, "") // device nodes are skipped
	w.entry(cpioTrailer, 0, 0, 1, "")

	root := t.TempDir()
	for _, d := range []string{"etc", "lib", "dev"} {
		require.NoError(t, os.Mkdir(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, extractCpio(&w, root))
	b, err := os.ReadFile(filepath.Join(root, "bin/busybox"))
	require.NoError(t, err)
	assert.Equal(t, "\x7fELF…", string(b))
	st, err := os.Stat(filepath.Join(root, "bin/busybox"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm())
	target, err := os.Readlink(filepath.Join(root, "bin/sh"))
	require.NoError(t, err)
	assert.Equal(t, "busybox", target)
	for _, n := range []string{"lib/a", "lib/b"} {
		b, err := os.ReadFile(filepath.Join(root, n))
		require.NoError(t, err, n)
		assert.Equal(t, "shared", string(b), n)
	}
	_, err = os.Lstat(filepath.Join(root, "dev/console"))
	assert.True(t, os.IsNotExist(err))
}

func TestExtractCpioRefusesBadArchives(t *testing.T) {
	outer := t.TempDir()
	root := filepath.Join(outer, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	var climb newcWriter
	climb.entry("../outside", 0o100644, 1, 1, "x")
	climb.entry("/abs", 0o100644, 2, 1, "y")
	climb.entry(cpioTrailer, 0, 0, 1, "")
	require.NoError(t, extractCpio(&climb, root))
	assert.FileExists(t, filepath.Join(root, "outside"), "'..' stops at the root")
	assert.FileExists(t, filepath.Join(root, "abs"))
	assert.NoFileExists(t, filepath.Join(outer, "outside"))

	var through newcWriter
	through.entry("up", 0o120777, 1, 1, outer)
	through.entry("up/planted", 0o100644, 2, 1, "z")
	through.entry(cpioTrailer, 0, 0, 1, "")
	require.ErrorContains(t, extractCpio(&through, root), "goes through the symbolic link")
	assert.NoFileExists(t, filepath.Join(outer, "planted"))

	var w newcWriter
	w.entry("a", 0o100644, 1, 1, "data")
	full := w.Bytes()
	require.Error(t, extractCpio(bytes.NewReader(full), t.TempDir()), "no trailer")
	require.ErrorContains(t, extractCpio(bytes.NewReader(append([]byte("070707"), full[6:]...)), t.TempDir()), "bad magic")
	require.Error(t, extractCpio(bytes.NewReader(full[:50]), t.TempDir()), "cut short")
}
