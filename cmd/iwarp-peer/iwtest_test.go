package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// iwtRun is the outcome of one iwtest invocation.
type iwtRun struct {
	err       error
	out, errs string
}

func (r iwtRun) String() string {
	return fmt.Sprintf("err=%v\nstdout:\n%sstderr:\n%s", r.err, r.out, r.errs)
}

// iwtPairRun runs an iwtest server on a free loopback port and a client
// against it, and returns both outcomes.
func iwtPairRun(t *testing.T, srvArgs, cliArgs string) (srv, cli iwtRun) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr := make(chan net.Addr, 1)
	srvDone := make(chan iwtRun, 1)
	go func() {
		var out, errs bytes.Buffer
		err := iwtest(ctx, append([]string{"-s", "-a", "127.0.0.1", "-p", "0"}, strings.Fields(srvArgs)...),
			&out, &errs, func(a net.Addr) { addr <- a })
		srvDone <- iwtRun{err, out.String(), errs.String()}
	}()
	var port int
	select {
	case a := <-addr:
		port = a.(*net.TCPAddr).Port
	case r := <-srvDone:
		t.Fatalf("the server did not listen: %s", r)
	}
	var out, errs bytes.Buffer
	err := iwtest(ctx, append([]string{"-c", "-a", "127.0.0.1", "-p", strconv.Itoa(port)}, strings.Fields(cliArgs)...),
		&out, &errs, nil)
	cli = iwtRun{err, out.String(), errs.String()}
	select {
	case srv = <-srvDone:
	case <-ctx.Done():
		t.Fatalf("the server did not finish; client:\n%s", cli)
	}
	return srv, cli
}

// iwtLines parses the "KEY k=v k=v …" lines iwtest prints.
func iwtLines(out, key string) []map[string]string {
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != key {
			continue
		}
		row := map[string]string{}
		for _, kv := range f[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				row[k] = strings.Trim(v, `"`)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// requireIwtAllOK checks one ok RESULT per test, size and direction and a
// SUMMARY that counts them.
func requireIwtAllOK(t *testing.T, r iwtRun, tests, sizes []string, iters string) {
	t.Helper()
	require.NoError(t, r.err, "%s", r)
	rows := iwtLines(r.out, "RESULT")
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
	sum := iwtLines(r.out, "SUMMARY")
	require.Len(t, sum, 1, "%s", r)
	require.Equal(t, strconv.Itoa(len(rows)), sum[0]["ok"])
	require.Equal(t, "0", sum[0]["failed"])
}

var iwtAllTests = []string{"write", "read", "send", "send_se", "send_inv", "send_sge", "write_sge"}

// Every test of PROTOCOL.md §5, both directions, sizes from one byte to
// 1 MiB (odd sizes split unevenly over the SGEs), two iterations, Go
// client against Go server. Each side checks the data, the SE bit and the
// invalidated STag on its own.
func TestIwtest_AllOperations(t *testing.T) {
	defer goleak.VerifyNone(t)
	sizes := []string{"1", "7", "4096", "65539", "1048576"}
	srv, cli := iwtPairRun(t, "-S 1m", "-T all -n 2 -S "+strings.Join(sizes, ","))
	requireIwtAllOK(t, cli, iwtAllTests, sizes, "2")
	requireIwtAllOK(t, srv, iwtAllTests, sizes, "2")

	for _, r := range []iwtRun{cli, srv} {
		sol := iwtLines(r.out, "SOLICITED")
		require.Len(t, sol, len(sizes)*2, "one per size and iteration on the receiving side")
		for _, row := range sol {
			require.Equal(t, "yes", row["event"])
		}
		inv := iwtLines(r.out, "INVALIDATE")
		require.Len(t, inv, len(sizes)*2)
		stags := map[string]bool{}
		for _, row := range inv {
			require.Equal(t, "yes", row["reported"])
			stags[row["stag"]] = true
		}
		require.Len(t, stags, len(inv), "a fresh region per phase")
	}
	est := iwtLines(cli.out, "ESTABLISHED")
	require.Len(t, est, 1)
	// The library's defaults: revision 2, enhanced, CRC, Write RTR.
	assert.Equal(t, map[string]string{"role": "client", "ird": "16", "ord": "16", "private_data_len": "0",
		"private_data": "-", "text": "", "mpa_rev": "2", "enhanced": "yes", "crc": "on", "p2p": "write"}, est[0])
}

// One direction at a time, and the server taking its plan from BEGIN.
func TestIwtest_OneDirection(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, dir := range []string{"c2s", "s2c"} {
		srv, cli := iwtPairRun(t, "-S 64k", "-T write,read,send_inv -S 100 -D "+dir)
		require.NoError(t, cli.err, "%s", cli)
		require.NoError(t, srv.err, "%s", srv)
		for _, r := range []iwtRun{cli, srv} {
			rows := iwtLines(r.out, "RESULT")
			require.Len(t, rows, 3)
			for _, row := range rows {
				assert.Equal(t, dir, row["dir"])
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
	srv, cli := iwtPairRun(t, "", "-T write,read,send -S 16m -D s2c")
	require.NoError(t, srv.err, "%s", srv)
	require.NoError(t, cli.err, "%s", cli)
	for _, row := range iwtLines(cli.out, "RESULT") {
		assert.Equal(t, "16777216", row["size"])
		assert.Equal(t, "ok", row["status"])
	}
}

// A server limited by -S refuses a larger plan in its HELLO (status
// length) and both sides fail.
func TestIwtest_HelloLength(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv, cli := iwtPairRun(t, "-S 4k", "-T send -S 8k")
	require.Error(t, cli.err)
	require.Error(t, srv.err)
	assert.Contains(t, cli.errs, "the server refused the session (status length)")
	assert.Contains(t, srv.errs, "the client wants 8192-byte messages, the limit is 4096")
}

// PROTOCOL.md §1: private data both ways, and the IRD/ORD each side sees.
func TestIwtest_PrivateDataAndIRDORD(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv, cli := iwtPairRun(t, "-S 4k -P accept-data --ird 4 --ord 4", "-T read -S 4k -P hello-from-client --ird 8 --ord 2")
	require.NoError(t, cli.err, "%s", cli)
	require.NoError(t, srv.err, "%s", srv)
	c := iwtLines(srv.out, "CONNECT")
	require.Len(t, c, 1)
	assert.Equal(t, "hello-from-client", c[0]["text"])
	assert.Equal(t, hex.EncodeToString([]byte("hello-from-client")), c[0]["private_data"])
	// rdma_cm's view: the initiator's ORD is what the responder must take.
	assert.Equal(t, "2", c[0]["ird"])
	assert.Equal(t, "8", c[0]["ord"])
	e := iwtLines(cli.out, "ESTABLISHED")
	require.Len(t, e, 1)
	assert.Equal(t, "accept-data", e[0]["text"])
	assert.Equal(t, "11", e[0]["private_data_len"])
}

// PROTOCOL.md §1 reject: the server rejects with private data; the client
// reports it and succeeds only when it expected it.
func TestIwtest_Reject(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv, cli := iwtPairRun(t, "--reject -P go-away", "--expect-reject")
	require.NoError(t, srv.err, "%s", srv)
	require.NoError(t, cli.err, "%s", cli)
	rej := iwtLines(cli.out, "REJECT")
	require.Len(t, rej, 1, "%s", cli)
	assert.Equal(t, "go-away", rej[0]["text"])
	assert.Equal(t, "676f2d61776179", rej[0]["private_data"])
	assert.Equal(t, "-104", rej[0]["status"])
	rs := iwtLines(srv.out, "REJECTED")
	require.Len(t, rs, 1)
	assert.Equal(t, "7", rs[0]["private_data_len"])
	assert.Empty(t, iwtLines(cli.out, "RESULT"))

	srv, cli = iwtPairRun(t, "--reject", "-T send")
	require.NoError(t, srv.err)
	require.Error(t, cli.err, "an unexpected reject fails the client")
	require.Len(t, iwtLines(cli.out, "REJECT"), 1)

	srv, cli = iwtPairRun(t, "-S 4k", "--expect-reject -T send -S 4k")
	require.Error(t, cli.err, "an accepted connection fails --expect-reject")
	assert.Contains(t, cli.errs, "a reject was expected")
	_ = srv
}

// The MPA flags reach connection setup: each variant is what the
// ESTABLISHED lines report, and a Read-heavy session runs over it.
func TestIwtest_MPAVariants(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, v := range []struct {
		name, srv, cli string
		want           map[string]string // both sides
		wantCli        map[string]string // the client only
	}{
		// A responder that prefers CRC turns it on; one with CRC off
		// follows the initiator, as siw does.
		{"crc-off", "--crc off", "--crc off", map[string]string{"crc": "off", "mpa_rev": "2", "enhanced": "yes"}, nil},
		{"crc-off-client", "", "--crc off", map[string]string{"crc": "on"}, nil},
		{"crc-required", "--crc required", "--crc required", map[string]string{"crc": "on"}, nil},
		{"rev1", "--mpa-rev 1", "--mpa-rev 1 --peer-ird 4", map[string]string{"mpa_rev": "1", "enhanced": "no", "p2p": "none"},
			map[string]string{"ird": "16", "ord": "4"}},
		{"no-enhanced", "", "--no-enhanced", map[string]string{"mpa_rev": "2", "enhanced": "no", "p2p": "none"}, nil},
		{"p2p-read", "--p2p read", "--p2p write,read", map[string]string{"p2p": "read"}, nil},
		{"p2p-send", "--p2p send", "--p2p send", map[string]string{"p2p": "send"}, nil},
		{"p2p-none", "--p2p none", "", map[string]string{"p2p": "none"}, nil},
		{"ird-ord", "--ird 2 --ord 8", "--ird 4 --ord 1", map[string]string{"p2p": "write"},
			map[string]string{"ird": "4", "ord": "1"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			srv, cli := iwtPairRun(t, "-S 64k "+v.srv, "-T read,write,send -S 1,65536 "+v.cli)
			requireIwtAllOK(t, cli, []string{"read", "write", "send"}, []string{"1", "65536"}, "1")
			requireIwtAllOK(t, srv, []string{"read", "write", "send"}, []string{"1", "65536"}, "1")
			for i, r := range []iwtRun{cli, srv} {
				e := iwtLines(r.out, "ESTABLISHED")
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
	srv, cli := iwtPairRun(t, "--mpa-rev 1", "-T send")
	require.Error(t, srv.err)
	require.Error(t, cli.err)
	assert.Contains(t, srv.errs, "rejecting a request of MPA revision 2")
}

// PROTOCOL.md §7 between two Go peers: the sink's stack sends a Terminate,
// the provoking side reports TERMINATED, and the writer, run with
// --expect-error, reports the Terminate it received with its code.
func TestIwtest_Provoke(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, c := range []struct {
		mode, code, cliArgs string
	}{
		// A Write without remote write rights: DDP Invalid STag (RFC 5041
		// §7.1 check 2; docs/rfc-notes/terminate.md WriteAccessRights).
		{"access", "0x1100", "-D c2s"},
		{"bounds", "0x1101", "-D c2s"},
		{"access", "0x1100", "-D s2c"}, // the client is the sink
	} {
		t.Run(c.mode+c.cliArgs, func(t *testing.T) {
			srvArgs, cliArgs := "-S 4k --expect-error -t 10", "-T write -S 4k --expect-error -t 10 "+c.cliArgs
			if c.cliArgs == "-D s2c" {
				cliArgs += " --provoke " + c.mode
			} else {
				srvArgs += " --provoke " + c.mode
			}
			srv, cli := iwtPairRun(t, srvArgs, cliArgs)
			require.NoError(t, srv.err, "%s", srv)
			require.NoError(t, cli.err, "%s", cli)
			provoker, writer := srv, cli
			if c.cliArgs == "-D s2c" {
				provoker, writer = cli, srv
			}
			require.Len(t, iwtLines(provoker.out, "TERMINATED"), 1, "%s", provoker)
			term := iwtLines(writer.out, "TERMINATE")
			require.Len(t, term, 1, "%s", writer)
			assert.Equal(t, "remote", term[0]["origin"])
			assert.Equal(t, c.code, term[0]["code"])
			assert.Equal(t, "rfc", term[0]["layout"], "iwarp-go sends the RFC layout")
			sent := iwtLines(provoker.out, "TERMINATE")
			require.Len(t, sent, 1, "%s", provoker)
			assert.Equal(t, "local", sent[0]["origin"])
			assert.Equal(t, term[0]["control"], sent[0]["control"], "the bytes sent are the bytes received")
			res := iwtLines(writer.out, "RESULT")
			require.Len(t, res, 1)
			assert.Equal(t, "op_error", res[0]["status"])
		})
	}
	// Without --expect-error the failed Write fails the writer.
	srv, cli := iwtPairRun(t, "-S 4k --provoke bounds -t 10", "-T write -D c2s -S 4k -t 10")
	require.NoError(t, srv.err, "%s", srv)
	require.Error(t, cli.err)
	// A provoking side whose peer's Write succeeds (the peer never writes
	// to it: send only) is not terminated and fails.
	srv, cli = iwtPairRun(t, "-S 4k --provoke access -t 10", "-T send -D c2s -S 4k -t 10")
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
	row := iwtLines(iwtTerminateLine("client", rt.Err()), "TERMINATE")
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
		hello := appendIwtCtrl(buf[32:32], &iwtMsg{Type: iwtHello})
		hello[3] = 0x32 // "IWT2"
		assert.NoError(t, qp.PostSend(conn.SendWR{ID: 2, Op: conn.OpSend, SGL: []conn.SGE{mr.SGE(32, 32)}}))
		<-qp.Done()
	}()
	var out, errs bytes.Buffer
	port := ln.Addr().(*net.TCPAddr).Port
	err = iwtest(ctx, []string{"-c", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-T", "send", "-t", "10"}, &out, &errs, nil)
	require.Error(t, err)
	assert.Contains(t, errs.String(), "not a control message")
	wg.Wait()
}

func TestIwtest_Usage(t *testing.T) {
	for _, args := range [][]string{
		{}, {"-s", "-c"}, {"-c"}, {"-s", "--expect-reject"}, {"-c", "-a", "x", "--reject"},
		{"-s", "-S", "0"}, {"-c", "-a", "x", "-T", "nope"}, {"-s", "--ird", "3"}, {"-s", "--crc", "maybe"},
		{"-s", "--mpa-rev", "3"}, {"-c", "-a", "x", "--mpa-rev", "1", "--p2p", "write"},
		{"-c", "-a", "x", "--mpa-rev", "1", "--no-enhanced"}, {"-s", "-D", "up"}, {"-s", "--provoke", "x"},
		{"-s", "-P", strings.Repeat("x", 252)}, {"-s", "-g", "7"}, {"-s", "extra"}, {"-c", "-a", "x", "-p", "0"},
		{"--print-pattern", "1,2,3"}, {"--print-pattern", "1,0,0,4097"},
	} {
		var out, errs bytes.Buffer
		code := run(append([]string{"iwtest"}, args...), &out, &errs)
		assert.Equal(t, 2, code, "%v: %s", args, errs.String())
	}
}

// --print-pattern prints PROTOCOL.md §6's vectors, as the C program does.
func TestIwtest_PrintPattern(t *testing.T) {
	var out, errs bytes.Buffer
	require.Equal(t, 0, run([]string{"iwtest", "--print-pattern", "3,1,2,13"}, &out, &errs), errs.String())
	require.Equal(t, "2ea232f8ab1a165f0883def6e5\n", out.String())
}

// An iwtest server and a client over loopback: the client drives a Send
// and an RDMA Read of 64 bytes in both directions and prints what it saw.
func Example_iwtest() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listening := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() {
		served <- iwtest(ctx, []string{"-s", "-a", "127.0.0.1", "-p", "0", "-S", "4k"}, io.Discard, io.Discard,
			func(a net.Addr) { listening <- a })
	}()
	port := (<-listening).(*net.TCPAddr).Port
	err := iwtest(ctx, []string{"-c", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-T", "send,read", "-S", "64"},
		os.Stdout, io.Discard, nil)
	fmt.Println("client:", err, "server:", <-served)
	// Output:
	// ESTABLISHED role=client ird=16 ord=16 private_data_len=0 private_data=- text="" mpa_rev=2 enhanced=yes crc=on p2p=write
	// RESULT role=client test=send dir=c2s size=64 iters=1 status=ok
	// RESULT role=client test=send dir=s2c size=64 iters=1 status=ok
	// RESULT role=client test=read dir=c2s size=64 iters=1 status=ok
	// RESULT role=client test=read dir=s2c size=64 iters=1 status=ok
	// SUMMARY role=client ok=4 failed=0
	// client: <nil> server: <nil>
}
