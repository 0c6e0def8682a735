//go:build linux || darwin || freebsd

package pmemsink

import (
	"context"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/rpma"
	"github.com/stretchr/testify/require"
)

// rawClient is an initiator built from conn alone, for replaying what
// librpma's example clients send and for sending what no honest client
// would.
type rawClient struct {
	t      *testing.T
	qp     *conn.QP
	cq     *conn.CQ
	buf    *conn.MR // data, then messages at msgAt
	pdata  []byte
	remote Remote
}

const (
	rawBuf   = 1 << 16
	rawMsgAt = rawBuf - 2*rpma.MessageSizeMax // send at rawMsgAt, receive after it
)

// dialRaw connects; like a librpma client it posts a receive first.
func dialRaw(t *testing.T, addr string, opts ...conn.Option) *rawClient {
	t.Helper()
	pd := conn.NewPD()
	c := &rawClient{t: t, cq: conn.NewCQ(64)}
	var err error
	c.qp, err = pd.NewQP(c.cq, conn.QPCaps{})
	require.NoError(t, err)
	c.buf, err = pd.Register(make([]byte, rawBuf), conn.LocalWrite)
	require.NoError(t, err)
	require.NoError(t, c.qp.PostRecv(conn.RecvWR{ID: 99, SGL: []conn.SGE{c.buf.SGE(rawMsgAt+rpma.MessageSizeMax, rpma.MessageSizeMax)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.qp.Connect(ctx, "tcp", addr, opts...))
	t.Cleanup(func() { c.qp.Close() })
	c.pdata = c.qp.Negotiated().PeerPrivateData
	c.remote, err = ParseRemote(c.pdata)
	require.NoError(t, err)
	return c
}

// librpma clients send no iwarp-go trailer: no Flush extension.
func dialLibrpma(t *testing.T, addr string) *rawClient {
	t.Helper()
	c := dialRaw(t, addr, conn.WithoutPeerTrailer(), conn.WithFirstFPDUDelay(0))
	require.False(t, c.qp.PeerFlushes())
	return c
}

func (c *rawClient) post(wrs ...conn.SendWR) {
	c.t.Helper()
	_, err := c.qp.PostSendBatch(wrs)
	require.NoError(c.t, err)
}

// next returns the next completion.
func (c *rawClient) next() conn.WorkCompletion {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]conn.WorkCompletion
	_, err := c.cq.Wait(ctx, wc[:])
	require.NoError(c.t, err)
	return wc[0]
}

// ok requires the next completion to be a success.
func (c *rawClient) ok() {
	c.t.Helper()
	wc := c.next()
	require.NoError(c.t, wc.Err())
}

func (c *rawClient) write(off uint64, data []byte, flags conn.SendFlags) conn.SendWR {
	copy(c.buf.Bytes()[off%rawMsgAt:], data)
	return conn.SendWR{Op: conn.OpWrite, Flags: flags, SGL: []conn.SGE{c.buf.SGE(int(off%rawMsgAt), len(data))}, Remote: c.remote.Addr(off)}
}

// rpmaFlush is librpma 1.2's rpma_flush: an 8-byte Read at the offset.
func (c *rawClient) rpmaFlush(off uint64) conn.SendWR {
	return conn.SendWR{Op: conn.OpRead, Flags: conn.Signaled, SGL: []conn.SGE{c.buf.SGE(rawMsgAt-8, 8)}, Remote: c.remote.Addr(off)}
}

func (c *rawClient) send(msg []byte) conn.SendWR {
	copy(c.buf.Bytes()[rawMsgAt:], msg)
	return conn.SendWR{Op: conn.OpSend, Flags: conn.Signaled, SGL: []conn.SGE{c.buf.SGE(rawMsgAt, len(msg))}}
}

func (c *rawClient) received(wc conn.WorkCompletion) []byte {
	return c.buf.Bytes()[rawMsgAt+rpma.MessageSizeMax:][:wc.ByteLen]
}

// The private data is librpma's whole 28-byte struct common_data: usage
// 0x19 and direct_write_to_pmem = 0 where nothing is durable, 0x39 and 1
// in a durable mode; the descriptor names the region.
func TestLibrpma_DescriptorBlob(t *testing.T) {
	for _, c := range []struct {
		name    string
		dir     func(testing.TB) string
		opts    []Option
		usage   rpma.Usage
		dwtp    byte
		readOnl bool
	}{
		{"volatile", memDir, nil, 0x19, 0, false},
		{"msync-tmpfs", memDir, []Option{WithMode(ModeMsync)}, 0x19, 0, false},
		{"msync-disk", diskDir, []Option{WithMode(ModeMsync)}, 0x39, 1, false},
		{"msync-disk read-only", diskDir, []Option{WithMode(ModeMsync)}, 0x11, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openT(t, tpath(c.dir(t), "sink"), 1<<20, c.opts...)
			x := serve(t, s, ServerConfig{DataOffset: 64, ReadOnly: c.readOnl})
			cl := dialLibrpma(t, x.addr())
			require.Len(t, cl.pdata, rpma.CommonDataLen)
			require.Equal(t, uint16(64), binary.LittleEndian.Uint16(cl.pdata[0:]))
			require.Equal(t, byte(rpma.MRDescriptorLen), cl.pdata[2])
			require.Equal(t, byte(rpma.PeerCfgDescriptorLen), cl.pdata[3])
			require.Equal(t, byte(c.usage), cl.pdata[4+20])
			require.Equal(t, c.dwtp, cl.pdata[4+21])
			require.Equal(t, uint64(1<<20), binary.LittleEndian.Uint64(cl.pdata[4+8:]))
			// The initiator may hold the Reply before the server has
			// recorded the connection.
			require.Eventually(t, func() bool { return len(x.srv.Conns()) == 1 }, 10*time.Second, time.Millisecond)
			sc := x.srv.Conns()[0]
			require.Equal(t, uint32(sc.Registration().MR().STag()), binary.LittleEndian.Uint32(cl.pdata[4+16:]))
			require.Equal(t, sc.Registration().MR().Remote(0).TO, binary.LittleEndian.Uint64(cl.pdata[4:]))
		})
	}
}

// What librpma 1.2's example clients 04, 05, 07 and 09 do, replayed
// without waiting where they do not wait: the sink serves each, and the
// file holds what they wrote.
func TestLibrpma_ExampleSequences(t *testing.T) {
	path := tpath(diskDir(t), "sink")
	s := openT(t, path, 1<<20, WithMode(ModeMsync))
	const dataOff = 256
	x := serve(t, s, ServerConfig{DataOffset: dataOff})
	hello := make([]byte, rpma.ExampleDataLen)
	for i := range hello {
		hello[i] = byte(i * 7)
	}
	file := func(off, n int) []byte {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return b[off : off+n]
	}

	t.Run("04 write, read back 8 bytes", func(t *testing.T) {
		c := dialLibrpma(t, x.addr())
		off := uint64(c.remote.DataOffset)
		c.post(c.write(off, hello, 0), c.rpmaFlush(off))
		wc := c.next()
		require.NoError(t, wc.Err())
		require.Equal(t, conn.WCRDMARead, wc.Op)
		require.Equal(t, hello[:8], c.buf.Bytes()[rawMsgAt-8:rawMsgAt])
		require.Equal(t, hello, file(dataOff, len(hello)))
	})

	t.Run("05 write, rpma_flush", func(t *testing.T) {
		c := dialLibrpma(t, x.addr())
		require.True(t, c.remote.DirectWriteToPmem)
		require.True(t, c.remote.Declares(MethodReadAfterWrite))
		off := uint64(c.remote.DataOffset) + 3 // possibly unaligned
		c.post(c.write(off, hello[:100], 0), c.rpmaFlush(off))
		c.ok()
		require.Equal(t, hello[:100], file(dataOff+3, 100))
		require.Equal(t, uint64(1), x.srv.Conns()[0].Stats().Persists)
	})

	t.Run("07 log append with an atomic write", func(t *testing.T) {
		c := dialLibrpma(t, x.addr())
		used := uint64(c.remote.DataOffset)
		// Read "used", write an entry after it, flush, then the 8-byte
		// fenced write of the new "used", and flush that.
		var word [8]byte
		c.post(conn.SendWR{Op: conn.OpRead, Flags: conn.Signaled, SGL: []conn.SGE{c.buf.SGE(rawMsgAt-16, 8)}, Remote: c.remote.Addr(used)})
		c.ok()
		entry := []byte("log entry one")
		at := used + 8 + 64
		binary.LittleEndian.PutUint64(word[:], at+uint64(len(entry)))
		c.post(c.write(at, entry, 0), c.rpmaFlush(at), c.write(used, word[:], conn.Fence), c.rpmaFlush(used))
		c.ok()
		c.ok()
		require.Equal(t, entry, file(int(at), len(entry)))
		require.Equal(t, word[:], file(int(used), 8))
	})

	t.Run("09 GPSPM", func(t *testing.T) {
		c := dialLibrpma(t, x.addr())
		off := uint64(c.remote.DataOffset) + 2048
		// The request follows the Write at once; the sink posted its
		// receive before the Reply.
		req := rpma.FlushRequest{Offset: off, Length: uint64(len(hello)), OpContext: 0xfeedface}.Append(nil)
		require.Len(t, req, rpma.FlushRequestLen)
		c.post(c.write(off, hello, 0), c.send(req))
		var resp []byte
		for range 2 {
			wc := c.next()
			require.NoError(t, wc.Err())
			if wc.Op == conn.WCRecv {
				resp = c.received(wc)
			}
		}
		require.Len(t, resp, rpma.FlushResponseLen)
		r, err := rpma.ParseFlushResponse(resp)
		require.NoError(t, err)
		require.Equal(t, uint64(0xfeedface), r.OpContext)
		require.Equal(t, hello, file(int(off), len(hello)))
	})
}

// terminated waits for the connection to end and returns the Terminate
// the target sent.
func terminated(t *testing.T, c *rawClient) *rdmap.TerminateError {
	t.Helper()
	select {
	case <-c.qp.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the target did not end the connection")
	}
	var te *rdmap.TerminateError
	require.ErrorAs(t, c.qp.Err(), &te)
	require.True(t, te.Remote, "the target sent it")
	return te
}

// Hostile input: each request that names memory outside the region, or a
// region the connection was not given, or is not a valid message, gets a
// Terminate or ends the connection with a clear error, and nothing
// outside the region is ever persisted.
func TestHostile_NothingOutsideTheRegion(t *testing.T) {
	page := pageSize()
	g := &gateShadow{}
	s := gatedSink(t, g, 16)
	ended := make(chan error, 16)
	// A window of pages 4 to 8 of the sink.
	x := serve(t, s, ServerConfig{Off: 4 * page, Len: 4 * page, Closed: func(c *ServerConn) { ended <- c.Err() }})
	other := dialRaw(t, x.addr())

	for _, tc := range []struct {
		name string
		wr   func(c *rawClient) conn.SendWR
		code rdmap.Condition
	}{
		{"flush past the region", func(c *rawClient) conn.SendWR {
			return conn.SendWR{Op: conn.OpFlush, Flags: conn.Signaled, Remote: c.remote.Addr(c.remote.Size - 8), FlushLength: 16}
		}, rdmap.ReadReqSourceBaseBounds},
		{"flush before the region", func(c *rawClient) conn.SendWR {
			return conn.SendWR{Op: conn.OpFlush, Flags: conn.Signaled, Remote: conn.RemoteAddr{STag: c.remote.STag, TO: c.remote.Base - 1}, FlushLength: 2}
		}, rdmap.ReadReqSourceBaseBounds},
		{"flush length past 2^64", func(c *rawClient) conn.SendWR {
			return conn.SendWR{Op: conn.OpFlush, Flags: conn.Signaled, Remote: c.remote.Addr(16), FlushLength: ^uint64(0) - 8}
		}, rdmap.ReadReqSourceTOWrap},
		{"flush of another connection's region", func(c *rawClient) conn.SendWR {
			return conn.SendWR{Op: conn.OpFlush, Flags: conn.Signaled, Remote: other.remote.Addr(0), FlushLength: 8}
		}, rdmap.ReadReqSourceNotAssociated},
		{"whole-region flush of another connection's region", func(c *rawClient) conn.SendWR {
			return conn.SendWR{Op: conn.OpFlush, Flags: conn.Signaled | conn.FlushRegion, Remote: other.remote.Addr(0)}
		}, rdmap.ReadReqSourceNotAssociated},
		{"read-after-write past the region", func(c *rawClient) conn.SendWR {
			return conn.SendWR{Op: conn.OpRead, Flags: conn.Signaled, SGL: []conn.SGE{c.buf.SGE(0, 8)}, Remote: c.remote.Addr(c.remote.Size - 4)}
		}, rdmap.ReadReqSourceBaseBounds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, x.addr())
			// Something dirty, so that a wrongly accepted flush would persist.
			c.post(c.write(100, []byte("dirty"), 0), tc.wr(c))
			te := terminated(t, c)
			require.Equal(t, tc.code.Code(), te.Code, "%v", te)
			require.Error(t, <-ended)
		})
	}

	t.Run("GPSPM that is not protobuf", func(t *testing.T) {
		c := dialRaw(t, x.addr())
		junk := make([]byte, rpma.FlushRequestLen)
		for i := range junk {
			junk[i] = 0xff
		}
		c.post(c.write(100, []byte("dirty"), 0), c.send(junk))
		<-c.qp.Done()
		require.ErrorIs(t, <-ended, rpma.ErrMalformed)
	})
	t.Run("GPSPM past the region", func(t *testing.T) {
		c := dialRaw(t, x.addr())
		req := rpma.FlushRequest{Offset: c.remote.Size - 4, Length: 8}.Append(nil)
		c.post(c.write(100, []byte("dirty"), 0), c.send(req))
		<-c.qp.Done()
		require.ErrorIs(t, <-ended, ErrGPSPMRange)
	})
	t.Run("GPSPM longer than a message buffer", func(t *testing.T) {
		c := dialRaw(t, x.addr())
		c.post(c.write(100, []byte("dirty"), 0), c.send(make([]byte, rpma.MessageSizeMax+1)))
		te := terminated(t, c)
		require.NotZero(t, te.Code)
		require.Error(t, <-ended)
	})

	other.qp.Close()
	require.Error(t, <-ended)
	// What was persisted is what the connections wrote, when they ended
	// (a detach persists what is dirty): inside the window.
	require.NotEmpty(t, g.persists())
	for _, r := range g.persists() {
		require.True(t, r.Off >= 4*page && r.End() <= 8*page, "persist %v outside the window", r)
	}
	b := make([]byte, page)
	require.NoError(t, s.Guard(func() error { copy(b, s.Bytes()[4*page+100:]); return nil }))
	require.Equal(t, "dirty", string(b[:5]), "the Writes before the bad requests were placed")
}

// A read-only sink serves Reads; a Write, a Flush Request or a GPSPM
// request ends the connection, and nothing is written or persisted.
func TestHostile_ReadOnly(t *testing.T) {
	g := &gateShadow{}
	s := gatedSink(t, g, 4)
	require.NoError(t, s.Guard(func() error { copy(s.Bytes(), "served as is"); return nil }))
	ended := make(chan error, 8)
	x := serve(t, s, ServerConfig{ReadOnly: true, Closed: func(c *ServerConn) { ended <- c.Err() }})

	c := dialRaw(t, x.addr())
	c.post(conn.SendWR{Op: conn.OpRead, Flags: conn.Signaled, SGL: []conn.SGE{c.buf.SGE(0, 12)}, Remote: c.remote.Addr(0)})
	c.ok()
	require.Equal(t, "served as is", string(c.buf.Bytes()[:12]))
	c.post(c.write(0, []byte("overwrite"), 0))
	te := terminated(t, c)
	require.Equal(t, rdmap.WriteAccessRights.Code(), te.Code)
	require.Error(t, <-ended)

	c = dialRaw(t, x.addr())
	c.post(conn.SendWR{Op: conn.OpFlush, Flags: conn.Signaled, Remote: c.remote.Addr(0), FlushLength: 8})
	te = terminated(t, c)
	require.Equal(t, rdmap.ReadReqSourceAccessRights.Code(), te.Code)
	require.Error(t, <-ended)

	c = dialRaw(t, x.addr())
	c.post(c.send(rpma.FlushRequest{Offset: 0, Length: 8}.Append(nil)))
	<-c.qp.Done()
	require.ErrorIs(t, <-ended, ErrReadOnly)

	require.Empty(t, g.persists())
	b := make([]byte, 12)
	require.NoError(t, s.Guard(func() error { copy(b, s.Bytes()); return nil }))
	require.Equal(t, "served as is", string(b))
}
