package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A /proc/net/tcp excerpt: a listener on 7174 (0x1C06), an established
// connection whose local port is 7175 (0x1C07), a TIME_WAIT socket on 7176.
const procNetTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0F02000A:1C06 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0000000000000000 100 0 0 10 0
   1: 0F02000A:1C07 0F02000A:D80E 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
   2: 0F02000A:1C08 0F02000A:D80F 06 00000000:00000000 03:00001000 00000000     0        0 0 3 0000000000000000
`

func TestListeningInFindsOnlyListenSockets(t *testing.T) {
	for port, want := range map[int]bool{7174: true, 7175: false, 7176: false, 18515: false, 0: false} {
		assert.Equal(t, want, listeningIn(strings.NewReader(procNetTCP), port), "port %d", port)
	}
	// tcp6 rows have longer addresses; the port is after the last colon.
	v6 := "header\n   0: 00000000000000000000000000000000:4853 00000000000000000000000000000000:0000 0A 0 0 0\n"
	assert.True(t, listeningIn(strings.NewReader(v6), 18515))
	assert.False(t, listeningIn(strings.NewReader("header\n garbage\n 0: nocolon x 0A\n"), 7174))
}

func TestParseEnvFile(t *testing.T) {
	m, err := parseEnvFile(strings.NewReader("# comment\n\nSIW_KERNEL=/a/b\nX=y=z\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"SIW_KERNEL": "/a/b", "X": "y=z"}, m)
	_, err = parseEnvFile(strings.NewReader("no equals sign\n"))
	require.Error(t, err)
}

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	var env strings.Builder
	for _, k := range []string{"SIW_KERNEL", "SIW_INITRD", "SIW_AGENT"} {
		p := filepath.Join(dir, k)
		require.NoError(t, os.WriteFile(p, nil, 0o644))
		env.WriteString(k + "=" + p + "\n")
	}
	env.WriteString("SIW_KNOBS=mpa_crc_required,mpa_version\n")
	ef := filepath.Join(dir, "current.env")
	require.NoError(t, os.WriteFile(ef, []byte(env.String()), 0o644))
	t.Setenv("IWARP_SIW_ENV", ef)
	t.Setenv("IWARP_SIW_OUT", "/results")
	t.Setenv("IWARP_SIW_KEEP", "1")
	cfg, err := ConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "SIW_KERNEL"), cfg.Kernel)
	assert.Equal(t, filepath.Join(dir, "SIW_AGENT"), cfg.Agent)
	assert.Equal(t, "/results", cfg.OutDir)
	assert.True(t, cfg.KeepWorkDir)
	assert.Equal(t, []string{"mpa_crc_required", "mpa_version"}, cfg.SiwKnobs)

	require.NoError(t, os.Remove(filepath.Join(dir, "SIW_INITRD")))
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, "SIW_INITRD")

	t.Setenv("IWARP_SIW_ENV", filepath.Join(dir, "absent.env"))
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, "run.sh build")
}

func TestDefaultEnvFileFollowsTheCacheVariables(t *testing.T) {
	t.Setenv("IWARP_CACHE", "/c")
	assert.Equal(t, "/c/siw-lab/current.env", DefaultEnvFile())
	t.Setenv("IWARP_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/x")
	assert.Equal(t, "/x/iwarp-go/siw-lab/current.env", DefaultEnvFile())
}

func TestSiwParams(t *testing.T) {
	got := parseParams("mpa_crc_required=Y\nmpa_version=1\n\nnoise\npeer_to_peer=N\n")
	assert.Equal(t, map[string]string{"mpa_crc_required": "Y", "mpa_version": "1", "peer_to_peer": "N"}, got)
	assert.Equal(t, "Y", normParam("peer_to_peer", "1"))
	assert.Equal(t, "N", normParam("mpa_crc_strict", "false"))
	assert.Equal(t, "1", normParam("mpa_version", "1"), "a byte parameter is not a boolean")
	assert.True(t, paramRe.MatchString("peer_to_peer=1"))
	assert.False(t, paramRe.MatchString("x=1; reboot"))
}

func TestNamesAndPaths(t *testing.T) {
	assert.Equal(t, "rping-s", sanitize("rping-s"))
	assert.Equal(t, "a-b-c", sanitize("a/b c"))
	assert.Equal(t, "job", sanitize(""))
	assert.Len(t, sanitize(strings.Repeat("x", 100)), 40)
	assert.True(t, validJobID("j0001-rping"))
	assert.False(t, validJobID("../x"))
	assert.False(t, validJobID("a.job"))

	g := NewGuest("/host/share", nil)
	p, err := g.HostPath("/mnt/out/x.pcap")
	require.NoError(t, err)
	assert.Equal(t, "/host/share/out/x.pcap", p)
	_, err = g.HostPath("/etc/passwd")
	require.Error(t, err)
}

func TestDroppedPackets(t *testing.T) {
	stats := "tcpdump: listening on lo, link-type EN10MB (Ethernet), snapshot length 262144 bytes\n" +
		"88 packets captured\n180 packets received by filter\n3 packets dropped by kernel\n"
	assert.Equal(t, 3, droppedPackets(stats))
	assert.Equal(t, 0, droppedPackets(strings.Replace(stats, "3 packets", "0 packets", 1)))
	assert.Equal(t, -1, droppedPackets("tcpdump: listening on lo\n"), "killed before it printed statistics")
}

func TestCheckSiwParam(t *testing.T) {
	require.NoError(t, CheckSiwParam("mpa_crc_required=1"))
	require.NoError(t, CheckSiwParam("peer_to_peer=Y"))
	for _, bad := range []string{"", "mpa_crc_required", "=1", "Mpa=1", "a=1 b=2", "a=1;reboot", "a=-1"} {
		require.Error(t, CheckSiwParam(bad), "%q", bad)
	}
}
