//go:build interop

package siw_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// librpma 1.2's example clients, replayed by rpmaclient (rpmaclient/):
// against librpma's own server inside the guest, and against iwarp-peer
// sink on the host.

const (
	rpmaPort    = 7176
	rpmaDataLen = 1024 // HELLO_STR_SIZE: what 04, 05 and 09 write at data_offset
)

// rpmaData is the 1 KiB rpmaclient -d text writes: the text, then zeros.
func rpmaData(text string) []byte {
	b := make([]byte, rpmaDataLen)
	copy(b, text)
	return b
}

// rpmaLine returns the one line of kind key for seq, requiring exactly one.
func rpmaLine(t *testing.T, out, key, seq string) map[string]string {
	t.Helper()
	var rows []map[string]string
	for _, r := range conntest.Lines(out, key) {
		if r["seq"] == seq {
			rows = append(rows, r)
		}
	}
	require.Len(t, rows, 1, "%s lines of seq %s:\n%s", key, seq, out)
	return rows[0]
}

// rpmaRun runs rpmaclient in the guest against addr:port.
func rpmaRun(t *testing.T, ctx context.Context, addr string, port int, args string) *lab.Result {
	t.Helper()
	prime := ""
	if addr == hostIP {
		prime = primeNeighbour
	}
	return run(t, ctx, 2*time.Minute, "rpmaclient", prime+fmt.Sprintf("exec rpmaclient -a %s -p %d -t 20 %s", addr, port, args))
}

// requireRpmaOK checks that every sequence of a run ended ok.
func requireRpmaOK(t *testing.T, res *lab.Result, seqs ...string) {
	t.Helper()
	require.True(t, res.OK(), "%s", res)
	for _, s := range seqs {
		assert.Equal(t, "ok", rpmaLine(t, res.Stdout, "RESULT", s)["status"], "%s", res)
	}
	sum := conntest.Lines(res.Stdout, "SUMMARY")
	require.Len(t, sum, 1, "%s", res)
	assert.Equal(t, strconv.Itoa(len(seqs)), sum[0]["ok"])
	assert.Equal(t, "0", sum[0]["failed"])
}

// hexOf decodes a hex field of a report line.
func hexOf(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err, "%q", s)
	return b
}

// logRegion is what 07's log looks like from used's offset on: used (u64
// LE), then the NUL-terminated words, as the client appends them from
// start.
func logRegion(start uint64, words ...string) (used uint64, entries []byte) {
	for _, w := range words {
		entries = append(entries, w...)
		entries = append(entries, 0)
	}
	return start + uint64(len(entries)), entries
}

// TestRpmaSiw: rpmaclient against its own librpma server (-s), both in
// the guest over siw: librpma on both sides, a check of the client's
// replay independent of iwarp-go. One server serves five connections: 07's
// log (two words), 04, 05, 09, and 05 demanding RPMA_FLUSH_TYPE_PERSISTENT
// of a server that did not declare direct write to pmem, which librpma
// refuses (RPMA_E_NOSUPP) before anything reaches the wire.
func TestRpmaSiw(t *testing.T) {
	ctx := scenario(t, 5*time.Minute)
	const dataOffset = 64
	srv := server(t, ctx, "rpma-s", fmt.Sprintf("exec rpmaclient -s -a %s -p %d -n 5 -t 20 --data-offset %d", guestIP, rpmaPort, dataOffset), rpmaPort)
	logRes := rpmaRun(t, ctx, guestIP, rpmaPort, "-o log -w alpha -w beta")
	wr := rpmaRun(t, ctx, guestIP, rpmaPort, "-o write-read -d first")
	wf := rpmaRun(t, ctx, guestIP, rpmaPort, "-o write-flush -d second")
	gp := rpmaRun(t, ctx, guestIP, rpmaPort, "-o gpspm -d third")
	nosupp := rpmaRun(t, ctx, guestIP, rpmaPort, "-o write-flush -f persistent -d fourth")
	sres := wait(t, ctx, srv, time.Minute)
	require.True(t, sres.OK(), "%s", sres)
	regions := conntest.Lines(sres.Stdout, "REGION")
	require.Len(t, regions, 5, "%s", sres)
	for _, r := range regions {
		require.Equal(t, "ok", r["status"], "%v", r)
		require.Equal(t, "RPMA_EXA", string(hexOf(t, r["head"])), "the server's signature at offset 0")
	}
	data := func(i int) []byte { return hexOf(t, regions[i]["data"]) }

	// 07: used starts behind itself; each word lands at used, then used
	// moves past it.
	requireRpmaOK(t, logRes, "log")
	desc := rpmaLine(t, logRes.Stdout, "DESCRIPTOR", "log")
	assert.Equal(t, strconv.Itoa(dataOffset), desc["data_offset"])
	assert.Equal(t, "21", desc["mr_desc_size"])
	assert.Equal(t, "1", desc["pcfg_desc_size"])
	assert.Equal(t, "0x19", desc["usage"], "WRITE_DST|READ_SRC|FLUSH_TYPE_VISIBILITY")
	assert.Equal(t, "0", desc["direct_write_to_pmem"])
	assert.Equal(t, strconv.Itoa(dataOffset+8), rpmaLine(t, logRes.Stdout, "USED", "log")["value"])
	used, entries := logRegion(dataOffset+8, "alpha", "beta")
	require.Equal(t, used, binary.LittleEndian.Uint64(data(0)), "used after two words")
	require.Equal(t, entries, data(0)[8:8+len(entries)])
	flushes := conntest.Lines(logRes.Stdout, "FLUSH")
	require.Len(t, flushes, 4, "a flush of each word and of each new used")
	for _, f := range flushes {
		assert.Equal(t, "visibility", f["type"], "07 takes the type from the usage bits")
		assert.Equal(t, "0", f["ret"])
	}
	require.Len(t, conntest.Lines(logRes.Stdout, "ATOMIC"), 2)

	// 04: the 8-byte read of offset 0 returns the server's signature.
	requireRpmaOK(t, wr, "write-read")
	assert.Equal(t, "RPMA_EXA", string(hexOf(t, rpmaLine(t, wr.Stdout, "READ", "write-read")["data"])))
	require.Equal(t, rpmaData("first"), data(1)[:rpmaDataLen])

	// 05: the server declared no direct write to pmem: visibility.
	requireRpmaOK(t, wf, "write-flush")
	fl := rpmaLine(t, wf.Stdout, "FLUSH", "write-flush")
	assert.Equal(t, "visibility", fl["type"])
	assert.Equal(t, "0", fl["ret"])
	assert.Equal(t, "ok", rpmaLine(t, wf.Stdout, "FLUSHED", "write-flush")["status"])
	require.Equal(t, rpmaData("second"), data(2)[:rpmaDataLen])

	// 09: the server saw the 27-byte request for exactly the written range.
	requireRpmaOK(t, gp, "gpspm")
	g := rpmaLine(t, gp.Stdout, "GPSPM", "gpspm")
	assert.Equal(t, "27", g["request_len"])
	assert.Equal(t, "9", g["response_len"])
	assert.Equal(t, "0xf01d", g["response_op_context"])
	reqs := conntest.Lines(sres.Stdout, "GPSPM_REQUEST")
	require.Len(t, reqs, 1, "%s", sres)
	assert.Equal(t, map[string]string{"role": "server", "conn": "3", "len": "27", "offset": strconv.Itoa(dataOffset),
		"length": "1024", "op_context": "0xf01d", "status": "ok"}, reqs[0])
	require.Equal(t, rpmaData("third"), data(3)[:rpmaDataLen])

	// A persistent flush the server did not offer: refused locally.
	require.False(t, nosupp.OK(), "%s", nosupp)
	assert.Equal(t, "nosupp", rpmaLine(t, nosupp.Stdout, "RESULT", "write-flush")["status"])
	fl = rpmaLine(t, nosupp.Stdout, "FLUSH", "write-flush")
	assert.Equal(t, "persistent", fl["type"])
	assert.Equal(t, "-100001", fl["ret"], "RPMA_E_NOSUPP")
	require.Equal(t, rpmaData("fourth"), data(4)[:rpmaDataLen], "the Write before the refused flush was placed")
}

// sinkMissing is why the sink scenarios skip, or "" once iwarp-peer has
// the command.
func sinkMissing(t *testing.T) string {
	t.Helper()
	out, _ := exec.Command(peerBin, "-h").CombinedOutput()
	if regexp.MustCompile(`(?m)^\s+sink\s`).Match(out) {
		return ""
	}
	return "iwarp-peer has no sink command yet (issue 12: `iwarp-peer sink`, the librpma-compatible target); " +
		"this scenario runs once it is on main"
}

// sinkRun is an iwarp-peer sink on the host serving one file.
type sinkRun struct {
	p    *hostProc
	file string
	port int
}

// startSink starts iwarp-peer sink on 127.0.0.1 with the file (which the
// caller may have filled; the sink serves its bytes as they are).
func startSink(t *testing.T, ctx context.Context, file string, size int, mode string) *sinkRun {
	t.Helper()
	port := freeHostPort(t)
	p := startHost(t, ctx, "sink", "sink", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "--file", file,
		"--size", strconv.Itoa(size), "--mode", mode)
	p.waitOutput(t, 30*time.Second, "listening on ")
	return &sinkRun{p: p, file: file, port: port}
}

// stop ends the sink as an operator does (SIGINT): it persists, prints
// one line and exits 0.
func (s *sinkRun) stop(t *testing.T) *hostResult {
	t.Helper()
	require.NoError(t, s.p.cmd.Process.Signal(os.Interrupt))
	res := s.p.wait(t, 30*time.Second)
	require.True(t, res.OK(), "%s", res)
	return res
}

// requireFile checks the sink's whole file, as the host reads it, against
// the model of what it must hold.
func (s *sinkRun) requireFile(t *testing.T, model []byte, after string) {
	t.Helper()
	got, err := os.ReadFile(s.file)
	require.NoError(t, err)
	require.Len(t, got, len(model))
	if i := firstDiff(got, model); i >= 0 {
		end := min(i+16, len(got))
		t.Fatalf("after %s the file differs at byte %d: % x, want % x", after, i, got[i:end], model[i:end])
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestRpmaSink: rpmaclient in the guest (librpma 1.2 over siw) against
// iwarp-peer sink on the host, on a file on the host's disk (msync mode,
// durable) and on tmpfs (volatile). Every sequence of the example clients
// runs on its own connection, and after each the host compares the whole
// file with a model of it: the file's bytes are the region's, served as
// they were (04 reads offset 0, 07 reads the used the host put there),
// every Write lands where librpma aimed it (the 1 KiB at data_offset of 04,
// 05 and 09; 07's words at used and the new used at data_offset), and no
// other byte changes (no metadata in the file). The descriptor says what the
// mode guarantees: usage 0x39 and direct_write_to_pmem = 1 only where
// durable, and there 05 flushes with RPMA_FLUSH_TYPE_PERSISTENT; on tmpfs
// librpma refuses a persistent flush (RPMA_E_NOSUPP).
func TestRpmaSink(t *testing.T) {
	if why := sinkMissing(t); why != "" {
		t.Skip(why)
	}
	for _, c := range []struct {
		name, mode string
		dir        func(t *testing.T) string
		durable    bool
	}{
		{"msync-disk", "msync", func(t *testing.T) string { return t.TempDir() }, true},
		{"volatile-tmpfs", "volatile", shmDir, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := scenario(t, 5*time.Minute)
			usage, direct, flushType := "0x19", "0", "visibility"
			if c.durable {
				usage, direct, flushType = "0x39", "1", "persistent"
			}
			record(t, matrixRow{Scenario: "librpma 1.2 example clients → sink (" + c.mode + ")", Initiator: siwName + " + librpma",
				Responder: goName + " sink", CRC: "off (siw default)", MPA: "rev 2 enhanced",
				Checks: "04, 05, 07, 09 sequences; the whole file checked on the host after each; descriptor usage " + usage})
			const size = 1 << 20
			file := filepath.Join(c.dir(t), "sink")
			model := make([]byte, size)
			for i := range model {
				model[i] = byte(i*7 + 3)
			}
			require.NoError(t, os.WriteFile(file, model, 0o600))
			s := startSink(t, ctx, file, size, c.mode)
			s.requireFile(t, model, "the sink started")

			// 04 first: it tells the data_offset the log needs.
			wr := rpmaRun(t, ctx, hostIP, s.port, "-o write-read -d first")
			requireRpmaOK(t, wr, "write-read")
			desc := rpmaLine(t, wr.Stdout, "DESCRIPTOR", "write-read")
			assert.Equal(t, "21", desc["mr_desc_size"])
			assert.Equal(t, "1", desc["pcfg_desc_size"])
			assert.Equal(t, strconv.Itoa(size), desc["length"])
			assert.Equal(t, usage, desc["usage"])
			assert.Equal(t, direct, desc["direct_write_to_pmem"])
			off, err := strconv.Atoi(desc["data_offset"])
			require.NoError(t, err)
			require.Zero(t, off%8, "data_offset is 8-aligned")
			require.LessOrEqual(t, off+rpmaDataLen, size)
			copy(model[off:], rpmaData("first"))
			assert.Equal(t, model[:8], hexOf(t, rpmaLine(t, wr.Stdout, "READ", "write-read")["data"]),
				"04 reads back region bytes 0–7 after its Write")
			s.requireFile(t, model, "04")

			// 07: a log whose used (at data_offset) starts behind itself,
			// put there by the host into the served file.
			start := uint64(off + 8)
			binary.LittleEndian.PutUint64(model[off:], start)
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(model[off:off+8], int64(off))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			lg := rpmaRun(t, ctx, hostIP, s.port, "-o log -w alpha -w beta -w gamma")
			requireRpmaOK(t, lg, "log")
			assert.Equal(t, strconv.FormatUint(start, 10), rpmaLine(t, lg.Stdout, "USED", "log")["value"])
			used, entries := logRegion(start, "alpha", "beta", "gamma")
			binary.LittleEndian.PutUint64(model[off:], used)
			copy(model[start:], entries)
			for _, fl := range conntest.Lines(lg.Stdout, "FLUSH") {
				assert.Equal(t, flushType, fl["type"], "07 picks the type from the usage bits")
				assert.Equal(t, "0", fl["ret"])
			}
			s.requireFile(t, model, "07")

			// 05 with the example's choice of flush type.
			wf := rpmaRun(t, ctx, hostIP, s.port, "-o write-flush -d second")
			requireRpmaOK(t, wf, "write-flush")
			assert.Equal(t, flushType, rpmaLine(t, wf.Stdout, "FLUSH", "write-flush")["type"])
			copy(model[off:], rpmaData("second"))
			s.requireFile(t, model, "05")

			// 09: the GPSPM request, answered after the persist.
			gp := rpmaRun(t, ctx, hostIP, s.port, "-o gpspm -d third")
			requireRpmaOK(t, gp, "gpspm")
			g := rpmaLine(t, gp.Stdout, "GPSPM", "gpspm")
			assert.Equal(t, "9", g["response_len"])
			assert.Equal(t, "0xf01d", g["response_op_context"])
			copy(model[off:], rpmaData("third"))
			s.requireFile(t, model, "09")

			// Demanding persistence: granted only by a durable sink.
			p := rpmaRun(t, ctx, hostIP, s.port, "-o write-flush -f persistent -d fourth")
			if c.durable {
				requireRpmaOK(t, p, "write-flush")
				assert.Equal(t, "ok", rpmaLine(t, p.Stdout, "FLUSHED", "write-flush")["status"])
			} else {
				require.False(t, p.OK(), "%s", p)
				assert.Equal(t, "nosupp", rpmaLine(t, p.Stdout, "RESULT", "write-flush")["status"])
				assert.Equal(t, "-100001", rpmaLine(t, p.Stdout, "FLUSH", "write-flush")["ret"], "RPMA_E_NOSUPP")
			}
			copy(model[off:], rpmaData("fourth"))
			s.requireFile(t, model, "05 with a persistent flush")

			res := s.stop(t)
			t.Logf("sink:\n%s", res.Stdout)
			assert.Contains(t, res.Stdout, ": 5 connections, ", "one per rpmaclient run")
			assert.Contains(t, res.Stdout, "region persisted")
			s.requireFile(t, model, "the sink stopped")
		})
	}
}

// shmDir is a directory on the host's tmpfs.
func shmDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "rpma-sink-")
	if err != nil {
		t.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// freeHostPort is a loopback port nothing listened on a moment ago.
func freeHostPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
