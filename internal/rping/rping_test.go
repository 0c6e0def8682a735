package rping

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
)

// run is one rping server running in the background.
type run struct {
	stdout, stderr conntest.LockedBuffer
	done           chan error
	cancel         context.CancelFunc
}

// startServer runs a server on a free loopback port with -v, size bytes
// and the given options, and returns it with its listening address once it
// listens. tweak, if not nil, changes the configuration first.
func startServer(t *testing.T, size int, tweak func(*Config), opts ...conn.Option) (*run, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	r := &run{done: make(chan error, 1), cancel: cancel}
	addrc := make(chan net.Addr, 1)
	cfg := &Config{Addr: "127.0.0.1", Size: size, Verbose: true, Options: opts, Out: &r.stdout, Err: &r.stderr,
		Ready: func(a net.Addr) { addrc <- a }}
	if tweak != nil {
		tweak(cfg)
	}
	go func() { r.done <- Serve(ctx, cfg) }()
	t.Cleanup(cancel)
	select {
	case a := <-addrc:
		return r, a.String()
	case err := <-r.done:
		t.Fatalf("server ended before listening: %v\n%s", err, r.stderr.String())
	}
	return nil, ""
}

// wait returns the run's result, failing the test if it takes too long.
func (r *run) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		r.cancel()
		t.Fatalf("rping did not end; stderr:\n%s", r.stderr.String())
	}
	return nil
}

// runClient runs a client of count pings of size bytes against addr to
// the end; tweak, if not nil, changes its configuration first.
func runClient(t *testing.T, addr string, size, count int, tweak func(*Config), opts ...conn.Option) (stdout, stderr string, err error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cfg := &Config{Addr: host, Port: p, Size: size, Count: count, Options: opts, Out: &out, Err: &errb}
	if tweak != nil {
		tweak(cfg)
	}
	err = Client(ctx, cfg)
	return out.String(), errb.String(), err
}

func verbose(c *Config) { c.Verbose, c.Validate, c.Debug = true, true, true }

// expectedPing is what rping.c's client puts into its buffer for ping n
// (and prints with -v): written here from the C loop's arithmetic, not
// with FillPing. The 58 characters 'A'..'z' rotate; ping n starts at
// character n mod 58 of that range.
func expectedPing(n, size int) string {
	prefix := fmt.Sprintf("rdma-ping-%d: ", n)
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; b.Len() < size-1; i++ {
		b.WriteByte(byte('A' + (n+i)%58))
	}
	return b.String()
}

func TestRping_PingPattern(t *testing.T) {
	buf := make([]byte, 64)
	start := byte('A')
	for n := 0; n < 130; n++ { // past two wraps of the start character
		start = FillPing(buf, n, start)
		require.Equal(t, expectedPing(n, 64), string(CString(buf)), "ping %d", n)
		require.Equal(t, byte(0), buf[63])
	}
	// 13 characters of prefix, 50 of pattern, the NUL.
	require.Equal(t, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr", expectedPing(0, 64))
	// A ping near the end of the range wraps from 'z' back to 'A'.
	require.Contains(t, expectedPing(57, 64), "rdma-ping-57: zABC")
}

func TestRping_InfoRoundTrip(t *testing.T) {
	in := Info{Addr: 0x00007f1234567890, RKey: 0xabcdef01, Size: 65535}
	b := AppendInfo(nil, in)
	require.Equal(t, []byte{0, 0, 0x7f, 0x12, 0x34, 0x56, 0x78, 0x90, 0xab, 0xcd, 0xef, 0x01, 0, 0, 0xff, 0xff}, b)
	out, err := ParseInfo(b)
	require.NoError(t, err)
	require.Equal(t, in, out)
	_, err = ParseInfo(b[:15])
	require.EqualError(t, err, "Received bogus data, size 15")
	_, err = ParseInfo(append(b, 0))
	require.Error(t, err)
}

// TestRping_GoClientGoServer runs the client against the server over
// loopback for each MPA variant, count and size, and checks every line of
// -v output against rping.c's formats and ping pattern.
func TestRping_GoClientGoServer(t *testing.T) {
	type variant struct {
		name      string
		server    []conn.Option
		client    []conn.Option
		size      int
		count     int
		wantSetup []string // in the client's -d description of the connection
	}
	variants := []variant{
		{name: "default-64", size: 64, count: 3,
			wantSetup: []string{"MPA rev 2 enhanced", "CRC off", "no peer-to-peer", "IRD 1 / ORD 1"}},
		{name: "size-4096", size: 4096, count: 2, wantSetup: []string{"MPA rev 2 enhanced"}},
		{name: "size-65535", size: 65535, count: 2, wantSetup: []string{"MPA rev 2 enhanced"}},
		{name: "min-size", size: 26, count: 1},
		{name: "crc-required", size: 64, count: 2, client: []conn.Option{conn.WithCRC(conn.CRCRequired)},
			wantSetup: []string{"CRC32c on"}},
		{name: "crc-preferred-server", size: 64, count: 1, server: []conn.Option{conn.WithCRC(conn.CRCPreferred)},
			wantSetup: []string{"CRC32c on"}},
		{name: "p2p-write", size: 4096, count: 2, client: []conn.Option{conn.WithP2P(conn.RTRWrite)},
			wantSetup: []string{"peer-to-peer with Write RTR"}},
		{name: "p2p-read", size: 4096, count: 2, client: []conn.Option{conn.WithP2P(conn.RTRRead)},
			wantSetup: []string{"peer-to-peer with Read RTR"}},
		{name: "p2p-send", size: 4096, count: 2, client: []conn.Option{conn.WithP2P(conn.RTRSend)},
			wantSetup: []string{"peer-to-peer with Send RTR"}},
		{name: "p2p-offer-all-server-read", size: 64, count: 1,
			client: []conn.Option{conn.WithP2P(conn.RTRWrite | conn.RTRRead | conn.RTRSend)}, server: []conn.Option{conn.WithP2P(conn.RTRRead)},
			wantSetup: []string{"peer-to-peer with Read RTR"}},
		{name: "mpa-rev1", size: 64, count: 3, client: []conn.Option{conn.WithMPARevision(1)},
			wantSetup: []string{"MPA rev 1", "no IRD/ORD exchange"}},
		{name: "mpa-rev1-crc", size: 65535, count: 1, client: []conn.Option{conn.WithMPARevision(1), conn.WithCRC(conn.CRCRequired)},
			wantSetup: []string{"MPA rev 1", "CRC32c on"}},
		{name: "no-enhanced", size: 64, count: 2, client: []conn.Option{conn.WithoutEnhanced()},
			wantSetup: []string{"MPA rev 2 (no Enhanced flag)", "no IRD/ORD exchange"}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			srv, addr := startServer(t, v.size, nil, v.server...)
			stdout, stderr, err := runClient(t, addr, v.size, v.count, verbose, v.client...)
			require.NoError(t, err, stderr)
			require.NoError(t, srv.wait(t), srv.stderr.String())

			var pings []string
			for _, line := range strings.Split(stdout, "\n") {
				if strings.HasPrefix(line, "ping data: ") {
					pings = append(pings, line)
				}
				if strings.HasPrefix(line, "connected to ") {
					for _, w := range v.wantSetup {
						require.Contains(t, line, w)
					}
				}
			}
			require.Len(t, pings, v.count)
			for i, line := range pings {
				require.Equal(t, "ping data: "+expectedPing(i, v.size), line)
			}
			serverLines := strings.Split(strings.TrimSuffix(srv.stdout.String(), "\n"), "\n")
			require.Len(t, serverLines, v.count)
			for i, line := range serverLines {
				require.Equal(t, "server ping data: "+expectedPing(i, v.size), line)
			}
			require.Equal(t, "server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n", srv.stderr.String())
			require.Contains(t, stderr, "client DISCONNECT EVENT...")
			for _, dbg := range []string{"rdma_connect successful", "RDMA addr ", "recv completion", "send completion"} {
				require.Contains(t, stdout, dbg)
			}
		})
	}
}

// A server that insists on one MPA revision rejects the other.
func TestRping_ServerRevisionFilter(t *testing.T) {
	srv, addr := startServer(t, DefaultSize, func(c *Config) { c.Rev = 2 }, conn.WithMPARevision(2))
	_, stderr, err := runClient(t, addr, DefaultSize, 1, nil, conn.WithMPARevision(1))
	require.Error(t, err)
	require.Contains(t, stderr, "connect error")
	require.Contains(t, stderr, "rejected")
	err = srv.wait(t)
	require.Error(t, err)
	require.Contains(t, srv.stderr.String(), "rejected a connection request of MPA revision 1")
}

// A client whose pings are larger than the server's buffer fails, as
// rping's does, neither side hangs, and both say why.
func TestRping_SizeLargerThanServer(t *testing.T) {
	srv, addr := startServer(t, 64, nil)
	_, stderr, err := runClient(t, addr, 128, 1, nil)
	require.Error(t, err)
	require.Contains(t, stderr, "rping client failed: wait for RDMA_WRITE_ADV state 10")
	require.Contains(t, stderr, "the server takes pings of at most 64 bytes (its -S), this client sends 128 (-S 128)")
	require.Error(t, srv.wait(t))
	require.Contains(t, srv.stderr.String(), "exceeds this server's -S 64")
}

// The persistent server serves several clients at once and keeps going
// until it is stopped.
func TestRping_PersistentServer(t *testing.T) {
	srv, addr := startServer(t, DefaultSize, func(c *Config) { c.Persistent = true })
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, stderr, err := runClient(t, addr, DefaultSize, 4, func(c *Config) { c.Validate = true })
			if err != nil {
				err = fmt.Errorf("%w: %s", err, stderr)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	// One more after the others left.
	_, stderr, err := runClient(t, addr, DefaultSize, 1, nil)
	require.NoError(t, err, stderr)
	srv.cancel()
	require.NoError(t, srv.wait(t))
	require.Equal(t, 13, strings.Count(srv.stdout.String(), "server ping data: rdma-ping-"))
}

// A persistent server whose connections share one receive queue serves
// sixteen clients at once, each validating its pings; the SRQ holds as
// many receives as clients, since each holds one at most.
func TestRping_PersistentServerSRQ(t *testing.T) {
	const clients = 16
	srv, addr := startServer(t, DefaultSize, func(c *Config) { c.Persistent, c.SRQ = true, clients })
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, stderr, err := runClient(t, addr, DefaultSize, 3, func(c *Config) { c.Validate = true })
			if err != nil {
				err = fmt.Errorf("%w: %s", err, stderr)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	srv.cancel()
	require.NoError(t, srv.wait(t))
	require.Equal(t, clients*3, strings.Count(srv.stdout.String(), "server ping data: rdma-ping-"))
}

// endless starts a client without -C in the background; it waits for
// the client's ping n, and returns its output and its result.
func endless(t *testing.T, ctx context.Context, addr string, n int) (out, errb *conntest.LockedBuffer, done chan error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	out, errb, done = &conntest.LockedBuffer{}, &conntest.LockedBuffer{}, make(chan error, 1)
	go func() {
		done <- Client(ctx, &Config{Addr: host, Port: p, Size: DefaultSize, Verbose: true, Out: out, Err: errb})
	}()
	ping := fmt.Sprintf("rdma-ping-%d: ", n)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), ping); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no ping %d:\n%s", n, errb.String())
		}
	}
	return out, errb, done
}

// Without -C the client runs until the server goes; that is success.
func TestRping_ClientUntilServerLeaves(t *testing.T) {
	srv, addr := startServer(t, DefaultSize, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Let some pings happen, then stop the server.
	out, errb, done := endless(t, ctx, addr, 1)
	srv.cancel()
	select {
	case err := <-done:
		require.NoError(t, err, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("client did not end after the server left")
	}
	srv.wait(t)
	require.Contains(t, out.String(), "ping data: rdma-ping-0: ")
	require.Contains(t, errb.String(), "client DISCONNECT EVENT...")
}

// A client interrupted mid-run fails and says so.
func TestRping_ClientInterrupted(t *testing.T) {
	srv, addr := startServer(t, DefaultSize, func(c *Config) { c.Persistent = true })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, errb, done := endless(t, ctx, addr, 2)
	cancel()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("client did not end after the interruption")
	}
	require.Regexp(t, `rping client failed: interrupted after \d+ pings`, errb.String())
	srv.cancel()
	require.NoError(t, srv.wait(t), "a stopped server ends cleanly")
}

// Without -a the server listens on every address, as rping binds
// INADDR_ANY; -I binds the client's source address.
func TestRping_AnyAddressAndSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listening := make(chan net.Addr, 1)
	var sout, serr conntest.LockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, &Config{Size: DefaultSize, Debug: true, Out: &sout, Err: &serr, Ready: func(a net.Addr) { listening <- a }})
	}()
	a := (<-listening).(*net.TCPAddr)
	require.True(t, a.IP.IsUnspecified(), "listening on %v", a)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
	stdout, stderr, err := runClient(t, addr, DefaultSize, 2, func(c *Config) { c.Validate, c.Debug, c.Src = true, true, "127.0.0.1" })
	require.NoError(t, err, stderr)
	require.Contains(t, stdout, "connected to 127.0.0.1:")
	require.NoError(t, <-done, serr.String())
	require.Contains(t, sout.String(), "connection from 127.0.0.1:")

	_, stderr, err = runClient(t, addr, DefaultSize, 1, func(c *Config) { c.Src = "no.such.host.invalid" })
	require.Error(t, err)
	require.Contains(t, stderr, "invalid hostname or IP address")
}

// Connections that never become rping clients do not consume a one-shot
// server: bytes that are not MPA, an MPA Request followed by a reset, a
// client that leaves before its first ping and one whose first message is
// not an rping advertisement. The next real client is served.
func TestRping_OneShotServerIgnoresGarbage(t *testing.T) {
	srv, addr := startServer(t, DefaultSize, nil)
	conntest.Garbage(t, addr)
	conntest.RequestThenReset(t, addr, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pd := conn.NewPD()
	for _, msg := range [][]byte{nil, make([]byte, InfoLen-1)} {
		qp, err := conn.Dial(ctx, "tcp", addr, pd, conn.NewCQ(4), conn.QPCaps{}, conn.WithCRC(conn.CRCOff))
		require.NoError(t, err)
		if msg != nil {
			mr, err := pd.Register(msg, 0)
			require.NoError(t, err)
			require.NoError(t, qp.PostSend(conn.SendWR{Op: conn.OpSend, SGL: []conn.SGE{mr.SGE(0, len(msg))}}))
			select {
			case <-qp.Done(): // the server left
			case <-ctx.Done():
				t.Fatal("the server kept the connection of a bogus client")
			}
		}
		require.NoError(t, qp.Close())
	}
	stdout, stderr, err := runClient(t, addr, DefaultSize, 2, verbose)
	require.NoError(t, err, stderr)
	require.Equal(t, 2, strings.Count(stdout, "ping data: rdma-ping-"))
	require.NoError(t, srv.wait(t), srv.stderr.String())
	log := srv.stderr.String()
	require.Contains(t, log, "rping server: ignored a connection from 127.0.0.1:")
	require.Contains(t, log, "disconnected before its first ping")
	require.Contains(t, log, "Received bogus data, size 15")
	require.Equal(t, 2, strings.Count(srv.stdout.String(), "server ping data: "), "only the real client's pings")
}
