package iwtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// run is the outcome of one iwtest invocation.
type run struct {
	err       error
	out, errs string
}

func (r run) String() string {
	return fmt.Sprintf("err=%v\nstdout:\n%sstderr:\n%s", r.err, r.out, r.errs)
}

// defaults is the configuration of the command line's defaults.
func defaults(server bool) *Config {
	c := &Config{Addr: "127.0.0.1", Iters: 1, Dirs: Both, SGEs: 4, Timeout: 30 * time.Second, Wait: 2 * time.Minute,
		IRD: conn.DefaultIRD, ORD: conn.DefaultORD, PeerIRD: conn.DefaultPeerIRD}
	if !server {
		c.Port = Port
	}
	return c
}

// with is a change to a configuration.
type with func(*Config)

func sizes(s ...uint32) with   { return func(c *Config) { c.Sizes = s } }
func tests(t ...Test) with     { return func(c *Config) { c.Tests = t } }
func dirs(d int) with          { return func(c *Config) { c.Dirs = d } }
func iters(n int) with         { return func(c *Config) { c.Iters = n } }
func pdata(s string) with      { return func(c *Config) { c.PrivateData = s } }
func irdORD(ird, ord int) with { return func(c *Config) { c.IRD, c.ORD = ird, ord } }
func timeout(d time.Duration) with {
	return func(c *Config) { c.Timeout = d }
}
func opts(o ...conn.Option) with { return func(c *Config) { c.Options = append(c.Options, o...) } }
func set(f func(*Config)) with   { return f }

// pairRun runs an iwtest server on a free loopback port and a client
// against it, and returns both outcomes.
func pairRun(t *testing.T, srvWith, cliWith []with) (srv, cli run) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr := make(chan net.Addr, 1)
	srvDone := make(chan run, 1)
	scfg, ccfg := defaults(true), defaults(false)
	for _, w := range srvWith {
		w(scfg)
	}
	for _, w := range cliWith {
		w(ccfg)
	}
	require.NoError(t, scfg.Check(true))
	require.NoError(t, ccfg.Check(false))
	go func() {
		var out, errs bytes.Buffer
		scfg.Out, scfg.Err, scfg.Ready = &out, &errs, func(a net.Addr) { addr <- a }
		err := Serve(ctx, scfg)
		srvDone <- run{err, out.String(), errs.String()}
	}()
	select {
	case a := <-addr:
		ccfg.Port = a.(*net.TCPAddr).Port
	case r := <-srvDone:
		t.Fatalf("the server did not listen: %s", r)
	}
	var out, errs bytes.Buffer
	ccfg.Out, ccfg.Err = &out, &errs
	err := Client(ctx, ccfg)
	cli = run{err, out.String(), errs.String()}
	select {
	case srv = <-srvDone:
	case <-ctx.Done():
		t.Fatalf("the server did not finish; client:\n%s", cli)
	}
	return srv, cli
}

func ws(w ...with) []with { return w }

// requireIwtAllOK checks one ok RESULT per test, size and direction and a
// SUMMARY that counts them.
func requireIwtAllOK(t *testing.T, r run, tests, sizes []string, iters string) {
	t.Helper()
	require.NoError(t, r.err, "%s", r)
	rows := conntest.Lines(r.out, "RESULT")
	require.Len(t, rows, len(tests)*len(sizes)*2, "%s", r)
	seen := map[string]bool{}
	for _, row := range rows {
		require.Equal(t, "ok", row["status"], "%v\n%s", row, r)
		require.Equal(t, iters, row["iters"], "%v", row)
		seen[row["test"]+"/"+row["size"]+"/"+row["dir"]] = true
	}
	for _, tst := range tests {
		for _, s := range sizes {
			for _, d := range []string{"c2s", "s2c"} {
				require.True(t, seen[tst+"/"+s+"/"+d], "no RESULT for %s %s %s\n%s", tst, s, d, r)
			}
		}
	}
	sum := conntest.Lines(r.out, "SUMMARY")
	require.Len(t, sum, 1, "%s", r)
	require.Equal(t, strconv.Itoa(len(rows)), sum[0]["ok"])
	require.Equal(t, "0", sum[0]["failed"])
}

var allTestNames = []string{"write", "read", "send", "send_se", "send_inv", "send_sge", "write_sge"}

// Every test of PROTOCOL.md §5, both directions, sizes from one byte to
// 1 MiB (odd sizes split unevenly over the SGEs), two iterations, Go
// client against Go server. Each side checks the data, the SE bit and the
// invalidated STag on its own.
func TestIwtest_AllOperations(t *testing.T) {
	defer goleak.VerifyNone(t)
	sz := []string{"1", "7", "4096", "65539", "1048576"}
	srv, cli := pairRun(t, ws(sizes(1<<20)), ws(iters(2), sizes(1, 7, 4096, 65539, 1048576)))
	requireIwtAllOK(t, cli, allTestNames, sz, "2")
	requireIwtAllOK(t, srv, allTestNames, sz, "2")

	for _, r := range []run{cli, srv} {
		sol := conntest.Lines(r.out, "SOLICITED")
		require.Len(t, sol, len(sz)*2, "one per size and iteration on the receiving side")
		for _, row := range sol {
			require.Equal(t, "yes", row["event"])
		}
		inv := conntest.Lines(r.out, "INVALIDATE")
		require.Len(t, inv, len(sz)*2)
		stags := map[string]bool{}
		for _, row := range inv {
			require.Equal(t, "yes", row["reported"])
			stags[row["stag"]] = true
		}
		require.Len(t, stags, len(inv), "a fresh region per phase")
	}
	est := conntest.Lines(cli.out, "ESTABLISHED")
	require.Len(t, est, 1)
	// The library's defaults: revision 2, enhanced, CRC, Write RTR.
	assert.Equal(t, map[string]string{"role": "client", "ird": "16", "ord": "16", "private_data_len": "0",
		"private_data": "-", "text": "", "mpa_rev": "2", "enhanced": "yes", "crc": "on", "p2p": "write"}, est[0])
}

// One direction at a time, and the server taking its plan from BEGIN.
func TestIwtest_OneDirection(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, dir := range []int{C2S, S2C} {
		srv, cli := pairRun(t, ws(sizes(64<<10)), ws(tests(TestWrite, TestRead, TestSendInv), sizes(100), dirs(dir)))
		require.NoError(t, cli.err, "%s", cli)
		require.NoError(t, srv.err, "%s", srv)
		for _, r := range []run{cli, srv} {
			rows := conntest.Lines(r.out, "RESULT")
			require.Len(t, rows, 3)
			for _, row := range rows {
				assert.Equal(t, dirName(uint8(dir>>1)), row["dir"])
				assert.Equal(t, "ok", row["status"])
			}
		}
	}
}

func TestIwtest_LargeMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("16 MiB messages")
	}
	defer goleak.VerifyNone(t)
	srv, cli := pairRun(t, nil, ws(tests(TestWrite, TestRead, TestSend), sizes(16<<20), dirs(S2C)))
	require.NoError(t, srv.err, "%s", srv)
	require.NoError(t, cli.err, "%s", cli)
	for _, row := range conntest.Lines(cli.out, "RESULT") {
		assert.Equal(t, "16777216", row["size"])
		assert.Equal(t, "ok", row["status"])
	}
}

// A server limited by -S refuses a larger plan in its HELLO (status
// length) and both sides fail.
func TestIwtest_HelloLength(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv, cli := pairRun(t, ws(sizes(4096)), ws(tests(TestSend), sizes(8192)))
	require.Error(t, cli.err)
	require.Error(t, srv.err)
	assert.Contains(t, cli.errs, "the server refused the session (status length)")
	assert.Contains(t, srv.errs, "the client wants 8192-byte messages, the limit is 4096")
}

// PROTOCOL.md §1: private data both ways, and the IRD/ORD each side sees.
func TestIwtest_PrivateDataAndIRDORD(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv, cli := pairRun(t, ws(sizes(4096), pdata("accept-data"), irdORD(4, 4)),
		ws(tests(TestRead), sizes(4096), pdata("hello-from-client"), irdORD(8, 2)))
	require.NoError(t, cli.err, "%s", cli)
	require.NoError(t, srv.err, "%s", srv)
	c := conntest.Lines(srv.out, "CONNECT")
	require.Len(t, c, 1)
	assert.Equal(t, "hello-from-client", c[0]["text"])
	assert.Equal(t, hex.EncodeToString([]byte("hello-from-client")), c[0]["private_data"])
	// rdma_cm's view: the initiator's ORD is what the responder must take.
	assert.Equal(t, "2", c[0]["ird"])
	assert.Equal(t, "8", c[0]["ord"])
	e := conntest.Lines(cli.out, "ESTABLISHED")
	require.Len(t, e, 1)
	assert.Equal(t, "accept-data", e[0]["text"])
	assert.Equal(t, "11", e[0]["private_data_len"])
}

// PROTOCOL.md §1 reject: the server rejects with private data; the client
// reports it and succeeds only when it expected it.
func TestIwtest_Reject(t *testing.T) {
	defer goleak.VerifyNone(t)
	reject := set(func(c *Config) { c.Reject = true })
	expectReject := set(func(c *Config) { c.ExpectReject = true })
	srv, cli := pairRun(t, ws(reject, pdata("go-away")), ws(expectReject))
	require.NoError(t, srv.err, "%s", srv)
	require.NoError(t, cli.err, "%s", cli)
	rej := conntest.Lines(cli.out, "REJECT")
	require.Len(t, rej, 1, "%s", cli)
	assert.Equal(t, "go-away", rej[0]["text"])
	assert.Equal(t, "676f2d61776179", rej[0]["private_data"])
	assert.Equal(t, "-104", rej[0]["status"])
	rs := conntest.Lines(srv.out, "REJECTED")
	require.Len(t, rs, 1)
	assert.Equal(t, "7", rs[0]["private_data_len"])
	assert.Empty(t, conntest.Lines(cli.out, "RESULT"))

	srv, cli = pairRun(t, ws(reject), ws(tests(TestSend)))
	require.NoError(t, srv.err)
	require.Error(t, cli.err, "an unexpected reject fails the client")
	require.Len(t, conntest.Lines(cli.out, "REJECT"), 1)

	srv, cli = pairRun(t, ws(sizes(4096)), ws(expectReject, tests(TestSend), sizes(4096)))
	require.Error(t, cli.err, "an accepted connection fails --expect-reject")
	assert.Contains(t, cli.errs, "a reject was expected")
	_ = srv
}

// The MPA options reach connection setup: each variant is what the
// ESTABLISHED lines report, and a Read-heavy session runs over it.
func TestIwtest_MPAVariants(t *testing.T) {
	defer goleak.VerifyNone(t)
	rev1 := ws(opts(conn.WithMPARevision(1)), set(func(c *Config) { c.Rev = 1 }))
	for _, v := range []struct {
		name     string
		srv, cli []with
		want     map[string]string // both sides
		wantCli  map[string]string // the client only
	}{
		// A responder that prefers CRC turns it on; one with CRC off
		// follows the initiator, as siw does.
		{"crc-off", ws(opts(conn.WithCRC(conn.CRCOff))), ws(opts(conn.WithCRC(conn.CRCOff))), map[string]string{"crc": "off", "mpa_rev": "2", "enhanced": "yes"}, nil},
		{"crc-off-client", nil, ws(opts(conn.WithCRC(conn.CRCOff))), map[string]string{"crc": "on"}, nil},
		{"crc-required", ws(opts(conn.WithCRC(conn.CRCRequired))), ws(opts(conn.WithCRC(conn.CRCRequired))), map[string]string{"crc": "on"}, nil},
		{"rev1", rev1, ws(opts(conn.WithMPARevision(1)), set(func(c *Config) { c.PeerIRD = 4 })),
			map[string]string{"mpa_rev": "1", "enhanced": "no", "p2p": "none"}, map[string]string{"ird": "16", "ord": "4"}},
		{"no-enhanced", nil, ws(opts(conn.WithoutEnhanced())), map[string]string{"mpa_rev": "2", "enhanced": "no", "p2p": "none"}, nil},
		{"p2p-read", ws(opts(conn.WithP2P(conn.RTRRead))), ws(opts(conn.WithP2P(conn.RTRWrite | conn.RTRRead))), map[string]string{"p2p": "read"}, nil},
		{"p2p-send", ws(opts(conn.WithP2P(conn.RTRSend))), ws(opts(conn.WithP2P(conn.RTRSend))), map[string]string{"p2p": "send"}, nil},
		{"p2p-none", nil, ws(opts(conn.WithoutP2P())), map[string]string{"p2p": "none"}, nil}, // a responder answers P2P whenever asked (RFC 6581 §9.2)
		{"ird-ord", ws(irdORD(2, 8)), ws(irdORD(4, 1)), map[string]string{"p2p": "write"},
			map[string]string{"ird": "4", "ord": "1"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			srv, cli := pairRun(t, append(ws(sizes(64<<10)), v.srv...), append(ws(tests(TestRead, TestWrite, TestSend), sizes(1, 65536)), v.cli...))
			requireIwtAllOK(t, cli, []string{"read", "write", "send"}, []string{"1", "65536"}, "1")
			requireIwtAllOK(t, srv, []string{"read", "write", "send"}, []string{"1", "65536"}, "1")
			for i, r := range []run{cli, srv} {
				e := conntest.Lines(r.out, "ESTABLISHED")
				require.Len(t, e, 1)
				for k, want := range v.want {
					assert.Equal(t, want, e[0][k], "%s in %v", k, e[0])
				}
				if i == 0 {
					for k, want := range v.wantCli {
						assert.Equal(t, want, e[0][k], "%s in %v", k, e[0])
					}
				}
			}
		})
	}
	// A server pinned to one revision refuses the other.
	srv, cli := pairRun(t, rev1, ws(tests(TestSend)))
	require.Error(t, srv.err)
	require.Error(t, cli.err)
	assert.Contains(t, srv.errs, "rejecting a request of MPA revision 2")
}

// PROTOCOL.md §7 between two Go peers: the sink's stack sends a Terminate,
// the provoking side reports TERMINATED, and the writer, run with
// --expect-error, reports the Terminate it received with its code.
func TestIwtest_Provoke(t *testing.T) {
	defer goleak.VerifyNone(t)
	expectError := set(func(c *Config) { c.ExpectError = true })
	provoke := func(p Provoke) with { return set(func(c *Config) { c.Provoke = p }) }
	for _, c := range []struct {
		mode Provoke
		code string
		dir  int
	}{
		// A Write without remote write rights: DDP Invalid STag (RFC 5041
		// §7.1 check 2; docs/rfc-notes/terminate.md WriteAccessRights).
		{ProvokeAccess, "0x1100", C2S},
		{ProvokeBounds, "0x1101", C2S},
		{ProvokeAccess, "0x1100", S2C}, // the client is the sink
	} {
		t.Run(c.mode.String()+"-"+dirName(uint8(c.dir>>1)), func(t *testing.T) {
			srvW := ws(sizes(4096), expectError, timeout(10*time.Second))
			cliW := ws(tests(TestWrite), sizes(4096), expectError, timeout(10*time.Second), dirs(c.dir))
			if c.dir == S2C {
				cliW = append(cliW, provoke(c.mode))
			} else {
				srvW = append(srvW, provoke(c.mode))
			}
			srv, cli := pairRun(t, srvW, cliW)
			require.NoError(t, srv.err, "%s", srv)
			require.NoError(t, cli.err, "%s", cli)
			provoker, writer := srv, cli
			if c.dir == S2C {
				provoker, writer = cli, srv
			}
			require.Len(t, conntest.Lines(provoker.out, "TERMINATED"), 1, "%s", provoker)
			term := conntest.Lines(writer.out, "TERMINATE")
			require.Len(t, term, 1, "%s", writer)
			assert.Equal(t, "remote", term[0]["origin"])
			assert.Equal(t, c.code, term[0]["code"])
			assert.Equal(t, "rfc", term[0]["layout"], "iwarp-go sends the RFC layout")
			sent := conntest.Lines(provoker.out, "TERMINATE")
			require.Len(t, sent, 1, "%s", provoker)
			assert.Equal(t, "local", sent[0]["origin"])
			assert.Equal(t, term[0]["control"], sent[0]["control"], "the bytes sent are the bytes received")
			res := conntest.Lines(writer.out, "RESULT")
			require.Len(t, res, 1)
			assert.Equal(t, "op_error", res[0]["status"])
		})
	}
	// Without --expect-error the failed Write fails the writer.
	srv, cli := pairRun(t, ws(sizes(4096), provoke(ProvokeBounds), timeout(10*time.Second)),
		ws(tests(TestWrite), dirs(C2S), sizes(4096), timeout(10*time.Second)))
	require.NoError(t, srv.err, "%s", srv)
	require.Error(t, cli.err)
	// A provoking side whose peer's Write succeeds (the peer never writes
	// to it: send only) is not terminated and fails.
	srv, cli = pairRun(t, ws(sizes(4096), provoke(ProvokeAccess), timeout(10*time.Second)),
		ws(tests(TestSend), dirs(C2S), sizes(4096), timeout(10*time.Second)))
	require.Error(t, srv.err, "%s", srv)
	require.NoError(t, cli.err, "%s", cli)
}

// The TERMINATE line reads a Terminate laid out as Linux siw sends it on
// x86 (error-codes.md §1.2): a Write past the end of a region gives
// control bytes 11 01 03 00, DDP segment length and the tagged header.
func TestIwtTerminateLine_SIWLayout(t *testing.T) {
	b := ddp.AppendUntagged(nil, ddp.Control(0x41), rdmap.MakeControl(rdmap.OpTerminate), 0, rdmap.QNTerminate, 1, 0)
	b = append(b, 0x11, 0x01, 0x03, 0x00)
	b = binary.BigEndian.AppendUint16(b, 4096)
	b = rdmap.AppendWrite(b, true, 0x1234, 0x7f00_0000_1000)
	rt, err := rdmap.ParseTerminate(b)
	require.NoError(t, err)
	row := conntest.Lines(terminateLine("client", rt.Err()), "TERMINATE")
	require.Len(t, row, 1)
	assert.Equal(t, "remote", row[0]["origin"])
	assert.Equal(t, "0x1101", row[0]["code"])
	assert.Equal(t, "siw", row[0]["layout"])
	assert.Equal(t, "11010300", row[0]["control"])
	assert.Equal(t, "1", row[0]["m"])
	assert.Equal(t, "1", row[0]["d"])
	assert.Equal(t, "0", row[0]["r"])
	assert.Equal(t, "1", row[0]["layer"])
	assert.Equal(t, "1", row[0]["etype"])
	assert.Equal(t, "0x01", row[0]["ecode"])
}

// A peer that breaks the protocol (here: a HELLO with the wrong magic)
// ends the session with status protocol; the Go peer disconnects.
func TestIwtest_ProtocolViolation(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A minimal hand-written server: take HELLO, answer with a bad
		// magic, wait for the client to leave.
		pd := conn.NewPD()
		cq := conn.NewCQ(8)
		qp, err := pd.NewQP(cq, conn.QPCaps{})
		if !assert.NoError(t, err) {
			return
		}
		defer qp.Close()
		buf := make([]byte, 64)
		mr, err := pd.Register(buf, conn.LocalWrite)
		if !assert.NoError(t, err) {
			return
		}
		assert.NoError(t, qp.PostRecv(conn.RecvWR{ID: 1, SGL: []conn.SGE{mr.SGE(0, 32)}}))
		req, err := ln.AcceptRequest(ctx)
		if !assert.NoError(t, err) {
			return
		}
		if !assert.NoError(t, req.Accept(ctx, qp)) {
			return
		}
		wcs := make([]conn.WorkCompletion, 1)
		_, err = cq.Wait(ctx, wcs)
		assert.NoError(t, err)
		hello := appendCtrl(buf[32:32], &message{Type: msgHello})
		hello[3] = 0x32 // "IWT2"
		assert.NoError(t, qp.PostSend(conn.SendWR{ID: 2, Op: conn.OpSend, SGL: []conn.SGE{mr.SGE(32, 32)}}))
		<-qp.Done()
	}()
	var out, errs bytes.Buffer
	cfg := defaults(false)
	cfg.Port, cfg.Tests, cfg.Timeout = ln.Addr().(*net.TCPAddr).Port, []Test{TestSend}, 10*time.Second
	cfg.Out, cfg.Err = &out, &errs
	err = Client(ctx, cfg)
	require.ErrorIs(t, err, ErrFailed)
	assert.Contains(t, errs.String(), "not a control message")
	wg.Wait()
}
