//go:build linux || darwin || freebsd

package pmemsink

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/rpma"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// Stand-ins for librpma 1.2's example servers, each sending exactly what
// its server.c sends, met by Dial. Sizes and offsets, from the examples:
//
//   - DRAM (no <pmem-path>): a malloc_aligned region of HELLO_STR_SIZE
//     (1024) bytes, data_offset 0 (04, 05, 09), or struct log of 07
//     (signature[8], u64 used, data[1024]: 1040 bytes, data_offset =
//     offsetof(used) = 8, used = offsetof(data) = 16).
//   - pmem: the whole mapped file, data_offset = SIGNATURE_LEN (17, after
//     "RPMA_EXAMPLE_SIG\0"; common_pmem_map_file_with_signature_check);
//     07's log at the file's start as in DRAM.
//
// The usage each registers (rpma_mr_reg in main of each server.c):
//
//	04 WRITE_DST|READ_SRC                                   0x09
//	05 WRITE_DST|FLUSH_TYPE_VISIBILITY (DRAM)               0x18
//	   WRITE_DST|FLUSH_TYPE_PERSISTENT|VISIBILITY (pmem)    0x38
//	07 WRITE_DST|READ_SRC|FLUSH_TYPE_VISIBILITY (DRAM)      0x19
//	   WRITE_DST|READ_SRC|FLUSH_TYPE_PERSISTENT (pmem)      0x29
//	09 WRITE_DST|FLUSH_TYPE_VISIBILITY (DRAM)               0x18
//	   WRITE_DST|FLUSH_TYPE_PERSISTENT (pmem)               0x28
//
// Only 05 sends a peer configuration (pcfg_desc_size 1): its
// direct_write_to_pmem is set only with a pmem path and the argument "on"
// (rpma_peer_cfg_set_direct_write_to_pmem). The others leave
// pcfg_desc_size 0 (struct common_data data = {0}). 09 alone posts a
// receive (rpma_conn_req_recv, MSG_SIZE_MAX 512 bytes) before it accepts
// and answers one GPSPM_flush_request; the others only wait for the close.
type rpmaExample struct {
	name       string
	usage      rpma.Usage
	pcfg       *rpma.PeerCfg // nil: pcfg_desc_size 0
	size       int
	dataOffset uint16
	gpspm      bool
	init       func(region []byte)
}

var (
	pcfgOff = &rpma.PeerCfg{}
	pcfgOn  = &rpma.PeerCfg{DirectWriteToPmem: true}
)

const (
	helloStrSize  = 1024 // HELLO_STR_SIZE, examples/common/common-hello.h
	signatureLen  = 17   // SIGNATURE_LEN: strlen("RPMA_EXAMPLE_SIG") + 1
	pmemFileSize  = 4096 // the stand-ins' "pmem file"
	logSize       = 8 + 8 + 1024
	logUsedOffset = 8
)

const (
	wDst  = rpma.UsageWriteDst
	rSrc  = rpma.UsageReadSrc
	fVis  = rpma.UsageFlushTypeVisibility
	fPers = rpma.UsageFlushTypePersistent
)

func logInit(region []byte) {
	binary.LittleEndian.PutUint64(region[logUsedOffset:], 16) // offsetof(struct log, data)
}

var (
	ex04     = rpmaExample{name: "04", usage: wDst | rSrc, size: helloStrSize}
	ex05     = rpmaExample{name: "05", usage: wDst | fVis, pcfg: pcfgOff, size: helloStrSize}
	ex05Pmem = rpmaExample{name: "05 pmem", usage: wDst | fPers | fVis, pcfg: pcfgOff, size: pmemFileSize, dataOffset: signatureLen}
	ex05On   = rpmaExample{name: "05 pmem on", usage: wDst | fPers | fVis, pcfg: pcfgOn, size: pmemFileSize, dataOffset: signatureLen}
	ex07     = rpmaExample{name: "07", usage: wDst | rSrc | fVis, size: logSize, dataOffset: logUsedOffset, init: logInit}
	ex07Pmem = rpmaExample{name: "07 pmem", usage: wDst | rSrc | fPers, size: pmemFileSize, dataOffset: logUsedOffset, init: logInit}
	ex09     = rpmaExample{name: "09", usage: wDst | fVis, size: helloStrSize, gpspm: true}
	ex09Pmem = rpmaExample{name: "09 pmem", usage: wDst | fPers, size: pmemFileSize, dataOffset: signatureLen, gpspm: true}
)

// usageAccess is librpma's rpma_peer_usage2access (src/peer.c) for the
// target's side: remote read for READ_SRC or either flush type, remote
// write for WRITE_DST.
func usageAccess(u rpma.Usage) conn.Access {
	a := conn.LocalWrite
	if u&(rSrc|fVis|fPers) != 0 {
		a |= conn.RemoteRead
	}
	if u&wDst != 0 {
		a |= conn.RemoteWrite
	}
	return a
}

// exampleRun is one stand-in serving one connection, as the examples do.
type exampleRun struct {
	addr    string
	region  []byte
	pdata   []byte
	done    chan error
	request chan rpma.FlushRequest // 09: the request it answered
}

// serveExample starts the stand-in; it serves one connection and ends when
// the initiator closes it.
func serveExample(t *testing.T, ex rpmaExample) *exampleRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	pd := conn.NewPD()
	mr, err := pd.Register(make([]byte, ex.size), usageAccess(ex.usage))
	require.NoError(t, err)
	if ex.init != nil {
		ex.init(mr.Bytes())
	}
	msg, err := pd.Register(make([]byte, 2*rpma.MessageSizeMax), conn.LocalWrite)
	require.NoError(t, err)
	cd := rpma.CommonData{DataOffset: ex.dataOffset,
		MR: rpma.MRDescriptor{Addr: mr.Remote(0).TO, Length: uint64(ex.size), RKey: uint32(mr.STag()), Usage: ex.usage}}
	if ex.pcfg != nil {
		cd.HasPeerCfg, cd.PeerCfg = true, *ex.pcfg
	}
	x := &exampleRun{addr: ln.Addr().String(), region: mr.Bytes(), pdata: cd.Append(nil),
		done: make(chan error, 1), request: make(chan rpma.FlushRequest, 1)}
	go func() {
		x.done <- x.serve(ctx, ln, pd, mr, msg, ex.gpspm)
		ln.Close()
	}()
	t.Cleanup(func() {
		defer cancel()
		select {
		case err := <-x.done:
			x.done <- err
		case <-time.After(20 * time.Second):
			t.Error("the stand-in did not end")
		}
	})
	return x
}

func (x *exampleRun) serve(ctx context.Context, ln *conn.Listener, pd *conn.PD, mr, msg *conn.MR, gpspm bool) error {
	req, err := ln.AcceptRequest(ctx)
	if err != nil {
		return err
	}
	cq := conn.NewCQ(8)
	qp, err := pd.NewQP(cq, conn.QPCaps{SendDepth: 4, RecvDepth: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		return err
	}
	defer qp.Close()
	if gpspm {
		// rpma_conn_req_recv before rpma_conn_req_connect.
		if err := qp.PostRecv(conn.RecvWR{ID: 1, SGL: []conn.SGE{msg.SGE(rpma.MessageSizeMax, rpma.MessageSizeMax)}}); err != nil {
			return err
		}
	}
	if err := req.Accept(ctx, qp, conn.WithPrivateData(x.pdata)); err != nil {
		return err
	}
	var wc [1]conn.WorkCompletion
	if gpspm {
		if _, err := cq.Wait(ctx, wc[:]); err != nil {
			return err
		}
		if err := wc[0].Err(); err != nil {
			return err
		}
		r, err := rpma.ParseFlushRequest(msg.Bytes()[rpma.MessageSizeMax:][:wc[0].ByteLen])
		if err != nil {
			return err
		}
		x.request <- r
		resp := rpma.FlushResponse{OpContext: r.OpContext}.Append(msg.Bytes()[:0])
		if err := qp.PostSend(conn.SendWR{ID: 2, Op: conn.OpSend, Flags: conn.Signaled, SGL: []conn.SGE{msg.SGE(0, len(resp))}}); err != nil {
			return err
		}
		if _, err := cq.Wait(ctx, wc[:]); err != nil {
			return err
		}
		if err := wc[0].Err(); err != nil {
			return err
		}
	}
	// common_wait_for_conn_close_and_disconnect: the peer's close ends
	// the connection; a Terminate from it would be an error here.
	select {
	case <-qp.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := qp.Err(); err != nil && !errors.Is(err, conn.ErrPeerClosed) {
		return err
	}
	return nil
}

// final waits for the stand-in to end (the initiator has closed) and
// returns its region: read before, it would race with placement.
func (x *exampleRun) final(t *testing.T) []byte {
	t.Helper()
	return x.finalErr(t, nil)
}

// finalErr is final for a stand-in expected to end with want: 09's, met
// without GPSPM, sees its receive flushed by the close, as its server.c
// does ("rpma_recv() failed").
func (x *exampleRun) finalErr(t *testing.T, want error) []byte {
	t.Helper()
	select {
	case err := <-x.done:
		x.done <- err
		if want != nil {
			require.ErrorIs(t, err, want)
		} else {
			require.NoError(t, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stand-in did not end")
	}
	return x.region
}

// dialExample dials a stand-in as a librpma server is met: the stand-in,
// built on conn, would otherwise answer iwarp-go's peer trailer with its
// own, which no librpma server sends.
func dialExample(t *testing.T, x *exampleRun, opts ...InitiatorOption) *Initiator {
	t.Helper()
	in := dialT(t, x.addr, append(opts, WithConnOptions(conn.WithoutPeerTrailer()))...)
	require.Equal(t, x.pdata, in.QP().Negotiated().PeerPrivateData, "the stand-in's 28 bytes, nothing more")
	require.False(t, in.QP().PeerFlushes())
	return in
}

func hello(s string) []byte {
	b := make([]byte, helloStrSize)
	copy(b, s)
	return b
}

// Dial reads each example server's descriptor: the region, its usage and
// peer configuration, and the data_offset its clients write at.
func TestRpmaServer_Descriptors(t *testing.T) {
	for _, ex := range []rpmaExample{ex04, ex05, ex05Pmem, ex05On, ex07, ex07Pmem, ex09, ex09Pmem} {
		t.Run(ex.name, func(t *testing.T) {
			x := serveExample(t, ex)
			in := dialExample(t, x)
			r := in.Remote()
			assert.Equal(t, uint64(ex.size), r.Size)
			assert.Equal(t, ex.usage, r.Usage)
			assert.Equal(t, ex.dataOffset, r.DataOffset)
			assert.Equal(t, ex.pcfg != nil, r.HasPeerCfg)
			assert.Equal(t, ex.pcfg != nil && ex.pcfg.DirectWriteToPmem, r.DirectWriteToPmem)
			assert.True(t, r.Writable(), "every example server declares WRITE_DST")
			assert.True(t, r.Readable(), "READ_SRC or a flush type grants remote read")
			require.NoError(t, in.Close())
		})
	}
}

// Toward the servers that answer no GPSPM (04, 05, 07) the flush is
// read-after-write, librpma 1.2's rpma_flush (src/flush.c: an 8-byte RDMA
// Read); it is Persistent only where the descriptor declared the
// persistent flush type and direct_write_to_pmem, which of the example
// servers only 05 with a pmem path and "on" does. RequirePersistent fails
// with ErrNotPersistent everywhere else, after the bytes were placed.
func TestRpmaServer_WriteFlushGuarantee(t *testing.T) {
	for _, c := range []struct {
		ex         rpmaExample
		persistent bool
	}{
		{ex04, false}, {ex05, false}, {ex05Pmem, false}, {ex05On, true}, {ex07, false}, {ex07Pmem, false},
		// 09 without WithGPSPM: its descriptor grants the Read, and
		// declares no direct write.
		{ex09, false}, {ex09Pmem, false},
	} {
		t.Run(c.ex.name, func(t *testing.T) {
			x := serveExample(t, c.ex)
			in := dialExample(t, x)
			ctx := tctx(t)
			require.Equal(t, MethodReadAfterWrite, in.Method())
			off := uint64(in.Remote().DataOffset)
			if c.ex.init != nil {
				off += 8 // past 07's used
			}
			data := hello("Hello from " + c.ex.name)[:min(helloStrSize, c.ex.size-int(off))]
			res, err := in.WriteFlush(ctx, off, data, RequirePersistent())
			assert.Equal(t, MethodReadAfterWrite, res.Method)
			if c.persistent {
				require.NoError(t, err)
				assert.Equal(t, Persistent, res.Guarantee)
			} else {
				require.ErrorIs(t, err, ErrNotPersistent)
				assert.Equal(t, Placed, res.Guarantee, "the flush completed: the bytes are placed")
				assert.Contains(t, err.Error(), "direct_write_to_pmem false")
			}
			// A plain flush says what it promises without failing.
			res, err = in.Flush(ctx, off, uint64(len(data)))
			require.NoError(t, err)
			assert.Equal(t, c.persistent, res.Guarantee == Persistent, "%v", res)
			require.NoError(t, in.Close())
			var want error
			if c.ex.gpspm {
				want = conn.ErrPeerClosed
			}
			assert.Equal(t, data, x.finalErr(t, want)[off:off+uint64(len(data))])
		})
	}
}

// The GPSPM example server's pmem descriptor (0x28, no peer configuration)
// makes a read-after-write RequirePersistent flush fail with a hint: its
// flushes persist by GPSPM.
func TestRpmaServer_GPSPMHint(t *testing.T) {
	x := serveExample(t, ex09Pmem)
	in := dialExample(t, x)
	_, err := in.Flush(tctx(t), 17, 1, RequirePersistent())
	require.ErrorIs(t, err, ErrNotPersistent)
	assert.Contains(t, err.Error(), "WithMethod(MethodGPSPM)")
	require.NoError(t, in.Close())
	x.finalErr(t, conn.ErrPeerClosed)
}

// Example 09's server, chosen with WithMethod(MethodGPSPM): one
// GPSPM_flush_request for exactly the written range (the receive it posts
// before it accepts takes it), one response echoing op_context. Persistent
// only where it declared FLUSH_TYPE_PERSISTENT (its pmem case, in which it
// persists the range before it answers).
func TestRpmaServer_GPSPM(t *testing.T) {
	for _, c := range []struct {
		ex         rpmaExample
		persistent bool
	}{{ex09, false}, {ex09Pmem, true}} {
		t.Run(c.ex.name, func(t *testing.T) {
			x := serveExample(t, c.ex)
			in := dialExample(t, x, WithMethod(MethodGPSPM))
			off := uint64(in.Remote().DataOffset)
			data := hello("Hello GPSPM")
			var opts []FlushOption
			if !c.persistent {
				opts = append(opts, RequirePersistent())
			}
			res, err := in.WriteFlush(tctx(t), off, data, opts...)
			if c.persistent {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrNotPersistent)
			}
			assert.Equal(t, FlushResult{Method: MethodGPSPM, Guarantee: map[bool]Guarantee{true: Persistent, false: Placed}[c.persistent]}, res)
			select {
			case r := <-x.request:
				assert.Equal(t, rpma.FlushRequest{Offset: off, Length: helloStrSize, OpContext: 1}, r)
			default:
				t.Fatal("the stand-in answered no request")
			}
			require.NoError(t, in.Close())
			assert.Equal(t, data, x.final(t)[off:off+helloStrSize])
		})
	}
}

// Example 07's client sequence from Dial: read used, write a word there,
// flush it, store the new used with an atomic write (an 8-byte fenced
// Write), flush that; the log is as 07's server prints it.
func TestRpmaServer_AtomicLog(t *testing.T) {
	x := serveExample(t, ex07)
	in := dialExample(t, x)
	ctx := tctx(t)
	usedAt := uint64(in.Remote().DataOffset)
	var b [8]byte
	for _, w := range []string{"alpha", "beta"} {
		require.NoError(t, in.Read(ctx, usedAt, b[:]))
		used := binary.LittleEndian.Uint64(b[:])
		word := append([]byte(w), 0)
		_, err := in.WriteFlush(ctx, used, word)
		require.NoError(t, err)
		require.NoError(t, in.WriteUint64(ctx, usedAt, used+uint64(len(word))))
		res, err := in.Flush(ctx, usedAt, 8)
		require.NoError(t, err)
		assert.Equal(t, FlushResult{Method: MethodReadAfterWrite, Guarantee: Placed}, res)
	}
	require.NoError(t, in.Close())
	region := x.final(t)
	require.Equal(t, uint64(16+6+5), binary.LittleEndian.Uint64(region[usedAt:]))
	require.Equal(t, "alpha\x00beta\x00", string(region[16:27]))
}

// What a descriptor does not offer is refused before anything is sent,
// and the connection stays usable: a Write into a region without
// WRITE_DST, a read-after-write flush of one with neither READ_SRC nor a
// flush type (librpma's rpma_flush refuses that with RPMA_E_NOSUPP).
func TestRpmaServer_NotOffered(t *testing.T) {
	t.Run("no WRITE_DST", func(t *testing.T) {
		x := serveExample(t, rpmaExample{name: "read-only", usage: rSrc, size: helloStrSize,
			init: func(r []byte) { copy(r, "readable") }})
		in := dialExample(t, x)
		ctx := tctx(t)
		require.ErrorIs(t, in.Write(ctx, 0, []byte("x")), ErrNotOffered)
		require.ErrorIs(t, in.WriteUint64(ctx, 0, 1), ErrNotOffered)
		_, err := in.WriteFlush(ctx, 0, []byte("x"))
		require.ErrorIs(t, err, ErrNotOffered)
		var b [8]byte
		require.NoError(t, in.Read(ctx, 0, b[:]))
		assert.Equal(t, "readable", string(b[:]))
		require.NoError(t, in.Close())
	})
	t.Run("write only", func(t *testing.T) {
		x := serveExample(t, rpmaExample{name: "write-only", usage: wDst, size: helloStrSize})
		in := dialExample(t, x)
		ctx := tctx(t)
		_, err := in.WriteFlush(ctx, 0, []byte("placed"))
		require.ErrorIs(t, err, ErrNotOffered)
		var b [6]byte
		require.ErrorIs(t, in.Read(ctx, 0, b[:]), ErrNotOffered)
		// The Write WriteFlush held back went out alone, and the
		// connection still works.
		require.NoError(t, in.Write(ctx, 8, []byte("more")))
		require.NoError(t, in.Close())
		assert.Equal(t, "placed\x00\x00more", string(x.final(t)[:12]))
	})
}

// Example 09's server answers one GPSPM request per connection and posts
// no second receive: a second GPSPM flush finds none, and the target ends
// the connection (RDMAP Terminate, DDP untagged buffer error). The
// initiator reports that within its context, as an error, never as a
// flush that succeeded, and stays failed.
func TestRpmaServer_GPSPMOnlyOnce(t *testing.T) {
	x := serveExample(t, ex09Pmem)
	in := dialExample(t, x, WithMethod(MethodGPSPM))
	ctx := tctx(t)
	res, err := in.WriteFlush(ctx, 17, []byte("first"))
	require.NoError(t, err)
	require.Equal(t, Persistent, res.Guarantee)
	res, err = in.WriteFlush(ctx, 17, []byte("second"))
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrNotPersistent)
	require.Equal(t, FlushResult{}, res, "no method, no guarantee")
	var te *rdmap.TerminateError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Remote, "the target's Terminate")
	assert.Equal(t, termcode.DDPUntaggedNoBuffer, te.Code, "RFC 5041 §7: no receive posted for the Send (untagged buffer error 1/2/0x02)")
	require.ErrorIs(t, in.Write(ctx, 0, []byte("x")), err, "the initiator stays failed")
	in.Close()
	<-x.request
	// The stand-in's side of it: it sent that Terminate.
	select {
	case serr := <-x.done:
		x.done <- serr
		require.ErrorAs(t, serr, &te)
		assert.False(t, te.Remote)
	case <-time.After(20 * time.Second):
		t.Fatal("the stand-in did not end")
	}
}
