package main

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
)

// rpingRun is one rping invocation running in the background.
type rpingRun struct {
	stdout, stderr lockedBuffer
	done           chan error
	cancel         context.CancelFunc
}

// lockedBuffer is a bytes.Buffer that a test may read while a command
// still writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startRpingServer runs "rping -s -a 127.0.0.1 -p 0 args..." and returns
// it with its listening address once it listens.
func startRpingServer(t *testing.T, args ...string) (*rpingRun, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	r := &rpingRun{done: make(chan error, 1), cancel: cancel}
	addrc := make(chan net.Addr, 1)
	all := append([]string{"-s", "-a", "127.0.0.1", "-p", "0"}, args...)
	go func() {
		r.done <- rping(ctx, all, &r.stdout, &r.stderr, func(a net.Addr) { addrc <- a })
	}()
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
func (r *rpingRun) wait(t *testing.T) error {
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

// runRpingClient runs "rping -c -a host -p port args..." to the end.
func runRpingClient(t *testing.T, addr string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err = rping(ctx, append([]string{"-c", "-a", host, "-p", port}, args...), &out, &errb, nil)
	return out.String(), errb.String(), err
}

// expectedPing is what rping.c's client puts into its buffer for ping n
// (and prints with -v): written here from the C loop's arithmetic, not
// with fillPing. The 58 characters 'A'..'z' rotate; ping n starts at
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
		start = fillPing(buf, n, start)
		require.Equal(t, expectedPing(n, 64), string(cString(buf)), "ping %d", n)
		require.Equal(t, byte(0), buf[63])
	}
	// 13 characters of prefix, 50 of pattern, the NUL.
	require.Equal(t, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr", expectedPing(0, 64))
	// A ping near the end of the range wraps from 'z' back to 'A'.
	require.Contains(t, expectedPing(57, 64), "rdma-ping-57: zABC")
}

func TestRping_InfoRoundTrip(t *testing.T) {
	in := rpingInfo{Addr: 0x00007f1234567890, RKey: 0xabcdef01, Size: 65535}
	b := appendRpingInfo(nil, in)
	require.Equal(t, []byte{0, 0, 0x7f, 0x12, 0x34, 0x56, 0x78, 0x90, 0xab, 0xcd, 0xef, 0x01, 0, 0, 0xff, 0xff}, b)
	out, err := parseRpingInfo(b)
	require.NoError(t, err)
	require.Equal(t, in, out)
	_, err = parseRpingInfo(b[:15])
	require.EqualError(t, err, "Received bogus data, size 15")
	_, err = parseRpingInfo(append(b, 0))
	require.Error(t, err)
}

func TestRping_Flags(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{}, "iwarp-peer rping -s"},
		{[]string{"-s", "-c"}, "iwarp-peer rping -s"},
		{[]string{"-s", "-S", "25"}, "Invalid size 25 (valid range is 26 to 65536)"},
		{[]string{"-s", "-S", "65536"}, "Invalid size 65536 (valid range is 26 to 65536)"},
		{[]string{"-s", "-C", "-1"}, "Invalid count -1"},
		{[]string{"-s", "-p", "70000"}, "Invalid port 70000"},
		{[]string{"-c"}, "the client needs -a addr"},
		{[]string{"-c", "-a", "x", "-P"}, "-P applies to the server only"},
		{[]string{"-s", "-I", "127.0.0.1"}, "-I applies to the client only"},
		{[]string{"-s", "--crc", "maybe"}, `--crc "maybe"`},
		{[]string{"-s", "--mpa-rev", "3"}, "--mpa-rev 3"},
		{[]string{"-s", "--p2p", "rdma"}, `--p2p "rdma"`},
		{[]string{"-c", "-a", "x", "--mpa-rev", "1", "--p2p", "write"}, "needs MPA revision 2"},
		{[]string{"-c", "-a", "x", "--mpa-rev", "1", "--no-enhanced"}, "--no-enhanced applies to MPA revision 2 only"},
		{[]string{"-s", "-x"}, "flag provided but not defined: -x"},
		{[]string{"-s", "extra"}, "iwarp-peer rping -s"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"rping"}, c.args...), &out, &errb)
			require.Equal(t, 2, code, errb.String())
			require.Contains(t, errb.String(), c.msg)
		})
	}

	// rping's limits themselves are accepted, and getopt clusters work.
	cfg, err := parseRpingFlags([]string{"-cvVd", "-a", "10.0.0.1", "-S65535", "-C", "3", "-p7175"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.True(t, cfg.client && cfg.verbose && cfg.validate && cfg.debug)
	require.Equal(t, 65535, cfg.size)
	require.Equal(t, 3, cfg.count)
	require.Equal(t, 7175, cfg.port)
	cfg, err = parseRpingFlags([]string{"-s", "-S", "26", "-P", "--crc", "required", "-p2p=none"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.True(t, cfg.server && cfg.persistent)
	require.Equal(t, 26, cfg.size)
	require.Equal(t, rpingPort, 7174)
	require.Equal(t, "required", cfg.mpa.crc)
	require.Equal(t, "none", cfg.mpa.p2p)
}

func TestExpandShortFlags(t *testing.T) {
	fs := newRpingFlagSet(&rpingConfig{}, &bytes.Buffer{})
	require.Equal(t, []string{"-v", "-V", "-d"}, expandShortFlags(fs, []string{"-vVd"}))
	require.Equal(t, []string{"-C", "10", "-S", "64"}, expandShortFlags(fs, []string{"-C10", "-S", "64"}))
	require.Equal(t, []string{"-c", "-a", "::1"}, expandShortFlags(fs, []string{"-ca", "::1"}))
	require.Equal(t, []string{"-crc", "off", "-p2p", "write"}, expandShortFlags(fs, []string{"-crc", "off", "-p2p", "write"}))
	require.Equal(t, []string{"-a", "-vV"}, expandShortFlags(fs, []string{"-a", "-vV"}), "a flag's value is not a cluster")
	require.Equal(t, []string{"-v", "x", "-vV"}, expandShortFlags(fs, []string{"-v", "x", "-vV"}), "no expansion after the first argument")
	require.Equal(t, []string{"--vV"}, expandShortFlags(fs, []string{"--vV"}))
}

// TestRping_GoClientGoServer runs the client against the server over
// loopback for each MPA variant, count and size, and checks every line of
// -v output against rping.c's formats and ping pattern.
func TestRping_GoClientGoServer(t *testing.T) {
	type variant struct {
		name       string
		server     []string
		client     []string
		size       int
		count      int
		wantSetup  []string // in the client's -d description of the connection
		serverFail bool
	}
	variants := []variant{
		{name: "default-64", size: 64, count: 3,
			wantSetup: []string{"MPA rev 2 enhanced", "CRC off", "no peer-to-peer", "IRD 1 / ORD 1"}},
		{name: "size-4096", size: 4096, count: 2, wantSetup: []string{"MPA rev 2 enhanced"}},
		{name: "size-65535", size: 65535, count: 2, wantSetup: []string{"MPA rev 2 enhanced"}},
		{name: "min-size", size: 26, count: 1},
		{name: "crc-required", size: 64, count: 2, client: []string{"--crc", "required"},
			wantSetup: []string{"CRC32c on"}},
		{name: "crc-preferred-server", size: 64, count: 1, server: []string{"--crc", "preferred"},
			wantSetup: []string{"CRC32c on"}},
		{name: "p2p-write", size: 4096, count: 2, client: []string{"--p2p", "write"},
			wantSetup: []string{"peer-to-peer with Write RTR"}},
		{name: "p2p-read", size: 4096, count: 2, client: []string{"--p2p", "read"},
			wantSetup: []string{"peer-to-peer with Read RTR"}},
		{name: "p2p-send", size: 4096, count: 2, client: []string{"--p2p", "send"},
			wantSetup: []string{"peer-to-peer with Send RTR"}},
		{name: "p2p-offer-all-server-read", size: 64, count: 1,
			client: []string{"--p2p", "write,read,send"}, server: []string{"--p2p", "read"},
			wantSetup: []string{"peer-to-peer with Read RTR"}},
		{name: "mpa-rev1", size: 64, count: 3, client: []string{"--mpa-rev", "1"},
			wantSetup: []string{"MPA rev 1", "no IRD/ORD exchange"}},
		{name: "mpa-rev1-crc", size: 65535, count: 1, client: []string{"--mpa-rev", "1", "--crc", "required"},
			wantSetup: []string{"MPA rev 1", "CRC32c on"}},
		{name: "no-enhanced", size: 64, count: 2, client: []string{"--no-enhanced"},
			wantSetup: []string{"MPA rev 2 (no Enhanced flag)", "no IRD/ORD exchange"}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			srv, addr := startRpingServer(t, append([]string{"-v", "-S", strconv.Itoa(v.size)}, v.server...)...)
			args := append([]string{"-v", "-V", "-d", "-S", strconv.Itoa(v.size), "-C", strconv.Itoa(v.count)}, v.client...)
			stdout, stderr, err := runRpingClient(t, addr, args...)
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
	srv, addr := startRpingServer(t, "--mpa-rev", "2")
	_, stderr, err := runRpingClient(t, addr, "-C", "1", "--mpa-rev", "1")
	require.Error(t, err)
	require.Contains(t, stderr, "connect error")
	require.Contains(t, stderr, "rejected")
	err = srv.wait(t)
	require.Error(t, err)
	require.Contains(t, srv.stderr.String(), "rejected a connection request of MPA revision 1")
}

// A client whose pings are larger than the server's buffer fails, as
// rping's does, and neither side hangs.
func TestRping_SizeLargerThanServer(t *testing.T) {
	srv, addr := startRpingServer(t, "-S", "64")
	_, stderr, err := runRpingClient(t, addr, "-S", "128", "-C", "1")
	require.Error(t, err)
	require.Contains(t, stderr, "rping client failed: wait for RDMA_WRITE_ADV state 10")
	require.Error(t, srv.wait(t))
	require.Contains(t, srv.stderr.String(), "exceeds this server's -S 64")
}

// The persistent server serves several clients at once and keeps going
// until it is stopped.
func TestRping_PersistentServer(t *testing.T) {
	srv, addr := startRpingServer(t, "-P", "-v")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, stderr, err := runRpingClient(t, addr, "-C", "4", "-V")
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
	_, stderr, err := runRpingClient(t, addr, "-C", "1")
	require.NoError(t, err, stderr)
	srv.cancel()
	require.NoError(t, srv.wait(t))
	require.Equal(t, 13, strings.Count(srv.stdout.String(), "server ping data: rdma-ping-"))
}

// Without -C the client runs until the server goes; that is success.
func TestRping_ClientUntilServerLeaves(t *testing.T) {
	srv, addr := startRpingServer(t, "-v")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host, port, _ := net.SplitHostPort(addr)
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- rping(ctx, []string{"-c", "-a", host, "-p", port, "-v"}, &out, &errb, nil) }()
	// Let some pings happen, then stop the server.
	deadline := time.Now().Add(10 * time.Second)
	for srv.stdout.String() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
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

// Without -a the server listens on every address, as rping binds
// INADDR_ANY; -I binds the client's source address.
func TestRping_AnyAddressAndSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listening := make(chan net.Addr, 1)
	var sout, serr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- rping(ctx, []string{"-s", "-p", "0", "-d"}, &sout, &serr, func(a net.Addr) { listening <- a })
	}()
	a := (<-listening).(*net.TCPAddr)
	require.True(t, a.IP.IsUnspecified(), "listening on %v", a)
	stdout, stderr, err := runRpingClient(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port)), "-C", "2", "-V", "-I", "127.0.0.1", "-d")
	require.NoError(t, err, stderr)
	require.Contains(t, stdout, "connected to 127.0.0.1:")
	require.NoError(t, <-done, serr.String())
	require.Contains(t, sout.String(), "connection from 127.0.0.1:")

	_, stderr, err = runRpingClient(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port)), "-C", "1", "-I", "no.such.host.invalid")
	require.Error(t, err)
	require.Contains(t, stderr, "invalid hostname or IP address")
}
