//go:build interop

package siw_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
	"github.com/iwarp-go/iwarp-go/pmemsink"
)

// librpma 1.2's example servers 04, 05, 07 and 09, replayed by rpmaserver
// (rpmaserver/) in the guest over siw, each met by the Go initiator on the
// host: iwarp-peer put and get, or pmemsink.Dial in this process. Each
// server serves one connection, its region in a guest file, which the test
// reads back after every sequence and compares with a model.

const rpmaFileSize = 4096

// rpmaPattern is what each guest file starts as, so that a stray byte
// shows: "0123456789abcdef" over and over.
func rpmaPattern() []byte {
	return bytes.Repeat([]byte("0123456789abcdef"), rpmaFileSize/16)
}

// rpmaServer is one run of rpmaserver on its file.
type rpmaServer struct {
	p    *lab.Proc
	file string
	// listening is its LISTENING line.
	listening map[string]string
}

// startRpmaServer fills (or keeps, when fresh is false) the guest file and
// starts example ex's server on it.
func startRpmaServer(t *testing.T, ctx context.Context, file string, fresh bool, ex string, flags string) *rpmaServer {
	t.Helper()
	if fresh {
		mustOK(t, run(t, ctx, time.Minute, "rpmaserver-file",
			fmt.Sprintf("yes 0123456789abcdef | tr -d '\\n' | head -c %d > %s", rpmaFileSize, file)))
	}
	p := server(t, ctx, "rpmaserver-"+ex, fmt.Sprintf("exec rpmaserver -a %s -p %d -e %s -f %s -t 20 %s",
		guestIP, rpmaPort, ex, file, flags), rpmaPort)
	return &rpmaServer{p: p, file: file}
}

// finish waits for the server to end after its one connection and
// returns its output.
func (s *rpmaServer) finish(t *testing.T, ctx context.Context, wantOK bool) *lab.Result {
	t.Helper()
	res := wait(t, ctx, s.p, time.Minute)
	t.Logf("rpmaserver:\n%s", res.Stdout)
	if wantOK {
		require.True(t, res.OK(), "%s", res)
	}
	l := conntest.Lines(res.Stdout, "LISTENING")
	require.Len(t, l, 1, "%s", res)
	s.listening = l[0]
	return res
}

// requireFile compares the guest's file with the model.
func (s *rpmaServer) requireFile(t *testing.T, ctx context.Context, model []byte, after string) {
	t.Helper()
	res := run(t, ctx, time.Minute, "rpmaserver-od", fmt.Sprintf("od -An -v -tx1 %s | tr -d ' \\n'", s.file))
	mustOK(t, res)
	got, err := hex.DecodeString(strings.TrimSpace(res.Stdout))
	require.NoError(t, err)
	require.Len(t, got, len(model))
	if i := firstDiff(got, model); i >= 0 {
		end := min(i+16, len(got))
		t.Fatalf("after %s the guest's file differs at byte %d: % x, want % x", after, i, got[i:end], model[i:end])
	}
}

// rpmaPut runs iwarp-peer put against the forwarded guest port.
func rpmaPut(t *testing.T, ctx context.Context, data []byte, args ...string) *hostResult {
	t.Helper()
	src := filepath.Join(t.TempDir(), "put")
	require.NoError(t, os.WriteFile(src, data, 0o600))
	host, port := guestPortAddr(t, rpmaPort)
	return runHost(t, ctx, time.Minute, "put", append(append([]string{"put", "-a", host, "-p", port}, args...), src)...)
}

// dialRpma dials the forwarded guest port with pmemsink.Dial.
func dialRpma(t *testing.T, ctx context.Context, opts ...pmemsink.InitiatorOption) *pmemsink.Initiator {
	t.Helper()
	host, port := guestPortAddr(t, rpmaPort)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	in, err := pmemsink.Dial(dctx, "tcp", net.JoinHostPort(host, port), opts...)
	require.NoError(t, err)
	return in
}

// rpmaSetup is what a connection to a librpma server negotiated, taken
// before it closes.
type rpmaSetup struct {
	n             conn.Negotiated
	ord           int
	isGo, flushes bool
}

func setupOf(t *testing.T, in *pmemsink.Initiator) rpmaSetup {
	t.Helper()
	n := in.QP().Negotiated()
	require.NotNil(t, n)
	_, ord := in.QP().ReadLimits()
	return rpmaSetup{n: *n, ord: ord, isGo: in.QP().PeerIsIwarpGo(), flushes: in.QP().PeerFlushes()}
}

// check compares it with the server's LISTENING line: the MPA Reply's
// private data is exactly the server's 28 bytes (librpma and siw add
// nothing), an RFC 6581 IRD/ORD exchange gave this side room for at least
// one outstanding Read (rpma_flush and 07's read of used are Reads), and
// the server is not taken for an iwarp-go peer.
func (s rpmaSetup) check(t *testing.T, listening map[string]string) {
	t.Helper()
	n := s.n
	t.Logf("negotiated: revision %d, CRC %v, IRD/ORD known %v (%d/%d, peer %d/%d), P2P %v RTR %v",
		n.Revision, n.CRC, n.IRDORDKnown, n.IRD, n.ORD, n.PeerIRD, n.PeerORD, n.P2P, n.RTR)
	assert.Equal(t, listening["private_data"], hex.EncodeToString(n.PeerPrivateData))
	assert.Equal(t, uint8(2), n.Revision)
	assert.True(t, n.IRDORDKnown, "siw answers MPA revision 2 with the enhanced IRD/ORD block")
	assert.GreaterOrEqual(t, s.ord, 1, "at least one Read outstanding toward the server")
	assert.False(t, s.isGo)
	assert.False(t, s.flushes)
}

// TestRpmaServer: the Go initiator toward librpma 1.2's example servers
// (rpmaserver in the guest over siw, built against Debian's librpma). Each
// sequence is one server run with one connection, and the guest's file is
// compared with a model of the region after each:
//
//   - 04 (DRAM): iwarp-peer put of a string at offset 0, flushed by
//     read-after-write, placed (the server declares no flush type); the
//     server prints it as "New value"; then a second 04 run on the same
//     file, met by iwarp-peer get, which returns the region's bytes.
//   - 05 (DRAM): put --persistent fails with ErrNotPersistent (no peer
//     declaration of direct writes to pmem), after the bytes were placed.
//   - 05 with --pmem --direct-pmem-write: put --persistent --offset data is
//     persistent, at data_offset 17 behind the example's signature.
//   - 07 (DRAM): its client's log sequence from pmemsink.Dial: read used,
//     write a word there, flush, store the new used with an 8-byte fenced
//     Write, flush; the server prints the words.
//   - 09 with --pmem: put --method gpspm --persistent: one
//     GPSPM_flush_request for exactly the written range, persistent.
//   - 09 with --pmem, GPSPM not named: put --persistent reads after
//     writing, placed, fails with ErrNotPersistent naming GPSPM.
//   - 09 (DRAM): pmemsink.Dial with MethodGPSPM and RequirePersistent:
//     ErrNotPersistent (the server declared visibility only), placed.
//
// The guest has no persistent memory: --pmem replays the declarations the
// examples make on pmem; what is checked is that the initiator reports
// exactly what was declared.
func TestRpmaServer(t *testing.T) {
	if why := sinkMissing(t); why != "" {
		t.Skip(why)
	}
	ctx := scenario(t, 10*time.Minute)
	record(t, matrixRow{Scenario: "iwarp-go initiator → librpma 1.2 example servers", Initiator: goName + " (put/get, pmemsink.Dial)",
		Responder: siwName + " + librpma (rpmaserver)", CRC: "on (Go asks, siw follows)", MPA: "rev 2 enhanced, P2P (Write RTR)",
		Checks: "04, 05, 07, 09 server sequences; the guest's file checked after each; guarantees as declared; ErrNotPersistent"})

	t.Run("04", func(t *testing.T) {
		model := rpmaPattern()
		s := startRpmaServer(t, ctx, "/tmp/ex04", true, "04", "")
		msg := append([]byte("Hello from iwarp-go"), 0)
		put := rpmaPut(t, ctx, msg)
		require.True(t, put.OK(), "%s", put)
		assert.Contains(t, put.Stderr, "read-after-write, placed", "04 declares no flush type")
		copy(model, msg)
		res := s.finish(t, ctx, true)
		assert.Equal(t, "0x09", s.listening["usage"], "WRITE_DST|READ_SRC")
		assert.Equal(t, "0", s.listening["pcfg_desc_size"])
		assert.Contains(t, res.Stdout, "New value: Hello from iwarp-go\n", "the example's own output")
		s.requireFile(t, ctx, model, "04 put")

		// A second 04 run on the same file: it prints the old value,
		// and get reads the 1 KiB region back.
		s = startRpmaServer(t, ctx, "/tmp/ex04", false, "04", "")
		host, port := guestPortAddr(t, rpmaPort)
		get := runHost(t, ctx, time.Minute, "get", "get", "-a", host, "-p", port, "--offset", "0", "--length", "1024")
		require.True(t, get.OK(), "%s", get)
		require.Equal(t, model[:1024], []byte(get.Stdout))
		assert.Contains(t, get.Stderr, "the target declares no durability")
		res = s.finish(t, ctx, true)
		assert.Contains(t, res.Stdout, "Old value: Hello from iwarp-go\n")
		s.requireFile(t, ctx, model, "04 get")
	})

	t.Run("05", func(t *testing.T) {
		model := rpmaPattern()
		s := startRpmaServer(t, ctx, "/tmp/ex05", true, "05", "")
		msg := append([]byte("not durable"), 0)
		put := rpmaPut(t, ctx, msg, "--persistent")
		require.False(t, put.OK(), "%s", put)
		assert.Contains(t, put.Stderr, "read-after-write, placed")
		assert.Contains(t, put.Stderr, pmemsink.ErrNotPersistent.Error())
		copy(model, msg)
		res := s.finish(t, ctx, true)
		assert.Equal(t, "0x18", s.listening["usage"], "WRITE_DST|FLUSH_TYPE_VISIBILITY")
		assert.Equal(t, "1", s.listening["pcfg_desc_size"])
		assert.Equal(t, "0", s.listening["direct_write_to_pmem"])
		assert.Contains(t, res.Stdout, "New value: not durable\n")
		s.requireFile(t, ctx, model, "05 put --persistent")
	})

	t.Run("05-pmem-direct", func(t *testing.T) {
		// common_pmem_map_file_with_signature_check: the signature, an
		// empty string behind it.
		model := rpmaPattern()
		copy(model, "RPMA_EXAMPLE_SIG\x00\x00")
		s := startRpmaServer(t, ctx, "/tmp/ex05p", true, "05", "--pmem --direct-pmem-write")
		msg := append([]byte("durable as declared"), 0)
		put := rpmaPut(t, ctx, msg, "--persistent", "--offset", "data")
		require.True(t, put.OK(), "%s", put)
		assert.Contains(t, put.Stderr, "at offset 17 of a 4 KiB region")
		assert.Contains(t, put.Stderr, "read-after-write, persistent")
		copy(model[17:], msg)
		res := s.finish(t, ctx, true)
		assert.Equal(t, "0x38", s.listening["usage"])
		assert.Equal(t, "1", s.listening["direct_write_to_pmem"])
		assert.Contains(t, res.Stdout, "New value: durable as declared\n")
		s.requireFile(t, ctx, model, "05 pmem put --persistent")
	})

	t.Run("07", func(t *testing.T) {
		model := rpmaPattern()
		s := startRpmaServer(t, ctx, "/tmp/ex07", true, "07", "")
		in := dialRpma(t, ctx)
		r := in.Remote()
		require.Equal(t, uint16(8), r.DataOffset, "offsetof(struct log, used)")
		require.Equal(t, uint64(1040), r.Size)
		var b [8]byte
		for _, w := range []string{"alpha", "beta"} {
			require.NoError(t, in.Read(ctx, 8, b[:]))
			used := binary.LittleEndian.Uint64(b[:])
			word := append([]byte(w), 0)
			res, err := in.WriteFlush(ctx, used, word)
			require.NoError(t, err)
			assert.Equal(t, "read-after-write, placed", res.String())
			require.NoError(t, in.WriteUint64(ctx, 8, used+uint64(len(word))))
			_, err = in.Flush(ctx, 8, 8)
			require.NoError(t, err)
		}
		setup := setupOf(t, in)
		require.NoError(t, in.Close())
		used, entries := logRegion(16, "alpha", "beta")
		binary.LittleEndian.PutUint64(model[8:], used)
		copy(model[16:], entries)
		res := s.finish(t, ctx, true)
		setup.check(t, s.listening)
		assert.Equal(t, "0x19", s.listening["usage"])
		assert.Contains(t, res.Stdout, "alpha\nbeta\n", "07's server prints the log")
		s.requireFile(t, ctx, model, "07 log")
	})

	t.Run("09-pmem", func(t *testing.T) {
		model := rpmaPattern()
		copy(model, "RPMA_EXAMPLE_SIG\x00\x00")
		s := startRpmaServer(t, ctx, "/tmp/ex09p", true, "09", "--pmem")
		msg := append([]byte("persisted by GPSPM"), 0)
		put := rpmaPut(t, ctx, msg, "--method", "gpspm", "--persistent", "--offset", "data")
		require.True(t, put.OK(), "%s", put)
		assert.Contains(t, put.Stderr, "gpspm, persistent")
		copy(model[17:], msg)
		res := s.finish(t, ctx, true)
		assert.Equal(t, "0x28", s.listening["usage"], "WRITE_DST|FLUSH_TYPE_PERSISTENT")
		reqs := conntest.Lines(res.Stdout, "GPSPM_REQUEST")
		require.Len(t, reqs, 1, "%s", res)
		assert.Equal(t, map[string]string{"role": "server", "len": "27", "offset": "17",
			"length": strconv.Itoa(len(msg)), "op_context": "0x1", "status": "ok"}, reqs[0])
		assert.Contains(t, res.Stdout, "Flush request received: {offset: 0x11, length: 0x13, op_context: 0x1}")
		assert.Contains(t, res.Stdout, "New value: persisted by GPSPM\n")
		s.requireFile(t, ctx, model, "09 pmem put --method gpspm")
	})

	t.Run("09-pmem-auto", func(t *testing.T) {
		// Not told that the server answers GPSPM, put reads after
		// writing: placed, and --persistent fails naming GPSPM. The
		// server, whose one receive the close flushes, fails as
		// example 09 does.
		model := rpmaPattern()
		copy(model, "RPMA_EXAMPLE_SIG\x00\x00")
		s := startRpmaServer(t, ctx, "/tmp/ex09a", true, "09", "--pmem")
		msg := append([]byte("placed, not persisted"), 0)
		put := rpmaPut(t, ctx, msg, "--persistent", "--offset", "data")
		require.False(t, put.OK(), "%s", put)
		assert.Contains(t, put.Stderr, "read-after-write, placed")
		assert.Contains(t, put.Stderr, pmemsink.ErrNotPersistent.Error())
		assert.Contains(t, put.Stderr, "--method gpspm")
		copy(model[17:], msg)
		res := s.finish(t, ctx, false)
		require.False(t, res.OK(), "%s", res)
		assert.Equal(t, "gpspm", conntest.Lines(res.Stdout, "RESULT")[0]["status"])
		s.requireFile(t, ctx, model, "09 pmem put without --method gpspm")
	})

	t.Run("09-dram", func(t *testing.T) {
		model := rpmaPattern()
		s := startRpmaServer(t, ctx, "/tmp/ex09", true, "09", "")
		in := dialRpma(t, ctx, pmemsink.WithMethod(pmemsink.MethodGPSPM))
		msg := append([]byte("only placed"), 0)
		res, err := in.WriteFlush(ctx, 0, msg, pmemsink.RequirePersistent())
		require.ErrorIs(t, err, pmemsink.ErrNotPersistent)
		assert.Equal(t, "gpspm, placed", res.String())
		setup := setupOf(t, in)
		require.NoError(t, in.Close())
		copy(model, msg)
		out := s.finish(t, ctx, true)
		setup.check(t, s.listening)
		assert.Equal(t, "0x18", s.listening["usage"])
		require.Len(t, conntest.Lines(out.Stdout, "GPSPM_REQUEST"), 1)
		assert.Contains(t, out.Stdout, "New value: only placed\n")
		s.requireFile(t, ctx, model, "09 GPSPM")
	})
}
