package connflags

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// parseMPA parses a command line of MPA flags.
func parseMPA(t *testing.T, args string) *MPA {
	var m MPA
	testutil.ParseFlags(t, m.Register, args)
	return &m
}

// connect connects a client with the options of client to a server with
// those of server, over loopback, and returns what the client settled.
func connect(t *testing.T, client, server []conn.Option) *conn.Negotiated {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pd := conn.NewPD()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0", server...)
	require.NoError(t, err)
	defer ln.Close()
	cq, scq := conn.NewCQ(8), conn.NewCQ(8)
	cli, err := pd.NewQP(cq, conn.QPCaps{})
	require.NoError(t, err)
	defer cli.Close()
	srv, err := pd.NewQP(scq, conn.QPCaps{})
	require.NoError(t, err)
	defer srv.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(ctx, srv) }()
	require.NoError(t, cli.Connect(ctx, "tcp", ln.Addr().String(), client...))
	require.NoError(t, <-accepted)
	return cli.Negotiated()
}

// Each flag given reaches the connection: what the client settled with a
// server that follows it (CRC off: set only if the client sets it; every
// RTR type accepted) is what the flags asked for.
func TestMPA_Options(t *testing.T) {
	for _, c := range []struct {
		args  string
		check func(t *testing.T, n *conn.Negotiated)
	}{
		{"--crc required", func(t *testing.T, n *conn.Negotiated) { require.True(t, n.CRC) }},
		{"--crc off", func(t *testing.T, n *conn.Negotiated) { require.False(t, n.CRC) }},
		{"--mpa-rev 1", func(t *testing.T, n *conn.Negotiated) {
			require.EqualValues(t, 1, n.Revision)
			require.False(t, n.IRDORDKnown)
		}},
		{"--no-enhanced", func(t *testing.T, n *conn.Negotiated) {
			require.EqualValues(t, 2, n.Revision)
			require.False(t, n.IRDORDKnown, "no RFC 6581 exchange")
			require.False(t, n.P2P)
		}},
		{"--p2p none", func(t *testing.T, n *conn.Negotiated) {
			require.True(t, n.IRDORDKnown)
			require.False(t, n.P2P)
		}},
		{"--p2p read", func(t *testing.T, n *conn.Negotiated) {
			require.True(t, n.P2P)
			require.Equal(t, conn.RTRRead, n.RTR)
		}},
	} {
		t.Run(c.args, func(t *testing.T) {
			opts, err := parseMPA(t, c.args).Options()
			require.NoError(t, err)
			c.check(t, connect(t, opts, []conn.Option{conn.WithCRC(conn.CRCOff), conn.WithP2P(conn.RTRWrite | conn.RTRRead | conn.RTRSend)}))
		})
	}
}

// A flag not given adds no option; each one given adds one.
func TestMPA_OptionsCount(t *testing.T) {
	for args, n := range map[string]int{
		"": 0, "--crc preferred": 1, "--mpa-rev 2 --no-enhanced": 2, "--crc required --mpa-rev 2 --p2p write,send": 3,
		"--mpa-rev 2 --p2p none": 2,
	} {
		opts, err := parseMPA(t, args).Options()
		require.NoError(t, err, args)
		require.Len(t, opts, n, args)
	}
}

func TestMPA_Mistakes(t *testing.T) {
	for args, msg := range map[string]string{
		"--crc maybe":                    `--crc "maybe": want off, preferred or required`,
		"--mpa-rev 3":                    "--mpa-rev 3: want 1 or 2",
		"--mpa-rev 1 --no-enhanced":      "--no-enhanced applies to MPA revision 2 only",
		"--p2p rdma":                     `--p2p "rdma": want none, or write, read and send separated by commas`,
		"--p2p write,,read":              `--p2p "write,,read"`,
		"--mpa-rev 1 --p2p write":        "--p2p write needs MPA revision 2 with the Enhanced flag",
		"--no-enhanced --p2p read,write": "--p2p read,write needs MPA revision 2 with the Enhanced flag",
	} {
		_, err := parseMPA(t, args).Options()
		require.ErrorContains(t, err, msg, args)
	}
	// Turning peer-to-peer off is allowed with every revision.
	_, err := parseMPA(t, "--mpa-rev 1 --p2p none").Options()
	require.NoError(t, err)
}

func TestParseRTR(t *testing.T) {
	for s, want := range map[string]conn.RTR{
		"none": 0, "write": conn.RTRWrite, "read": conn.RTRRead, "send": conn.RTRSend,
		"write, read": conn.RTRWrite | conn.RTRRead, "send,write,read": conn.RTRWrite | conn.RTRRead | conn.RTRSend,
	} {
		got, err := ParseRTR(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "all", "none,write", "WRITE"} {
		_, err := ParseRTR(s)
		require.Error(t, err, s)
	}
}

func TestParseCRC(t *testing.T) {
	for s, want := range map[string]conn.CRCMode{"off": conn.CRCOff, "preferred": conn.CRCPreferred, "required": conn.CRCRequired} {
		got, err := ParseCRC(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "on", "Required"} {
		_, err := ParseCRC(s)
		require.EqualError(t, err, `--crc "`+s+`": want off, preferred or required`)
	}
}
