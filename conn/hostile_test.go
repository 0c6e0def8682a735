package conn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
	"github.com/stretchr/testify/require"
)

// The hostile-peer suite: a raw peer speaks hand-built frames to an
// iwarp-go queue pair, one case per row of docs/rfc-notes/terminate.md
// (rdmap.Conditions). Each case asserts the exact Terminate on the wire,
// the queue pair's local error, and that no byte of the target's memory
// outside what valid segments addressed has changed — including bytes a
// valid segment sent right after the offending one would have placed.

const (
	guardLen  = 512
	regionLen = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// hostileServer is an iwarp-go responder whose regions sit between guard
// zones of one arena.
type hostileServer struct {
	t     *testing.T
	pd    *PD
	cq    *CQ
	qp    *QP
	ln    *Listener
	arena []byte
	want  []byte // what the arena must hold at the end

	rw    *MR // LocalWrite|RemoteWrite|RemoteRead
	ro    *MR // RemoteRead only
	recv  *MR // receive buffer
	other *MR // remote-writable, in another PD of the same device
}

func newHostileServer(t *testing.T, opts ...Option) *hostileServer {
	t.Helper()
	s := &hostileServer{t: t, pd: NewPD(), cq: NewCQ(64)}
	s.arena = pattern(guardLen+4*(regionLen+guardLen), 0xA5)
	region := func(i int) []byte {
		off := guardLen + i*(regionLen+guardLen)
		return s.arena[off : off+regionLen : off+regionLen]
	}
	var err error
	s.rw, err = s.pd.Register(region(0), LocalWrite|RemoteWrite|RemoteRead)
	require.NoError(t, err)
	s.ro, err = s.pd.Register(region(1), RemoteRead)
	require.NoError(t, err)
	s.recv, err = s.pd.Register(region(2), LocalWrite)
	require.NoError(t, err)
	s.other, err = NewPD().Register(region(3), LocalWrite|RemoteWrite|RemoteRead)
	require.NoError(t, err)
	s.want = append([]byte(nil), s.arena...)
	s.qp, err = s.pd.NewQP(s.cq, QPCaps{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	s.ln, err = Listen(ctx, "tcp", "127.0.0.1:0", opts...)
	require.NoError(t, err)
	accepted := make(chan error, 1)
	go func() { accepted <- s.ln.Accept(ctx, s.qp) }()
	t.Cleanup(func() {
		s.ln.Close()
		<-accepted
		s.qp.Close()
	})
	return s
}

// placed records that data is expected at off of mr.
func (s *hostileServer) placed(mr *MR, off int, data []byte) {
	base := guardLen
	for _, m := range []*MR{s.rw, s.ro, s.recv, s.other} {
		if m == mr {
			copy(s.want[base+off:], data)
			return
		}
		base += regionLen + guardLen
	}
	s.t.Fatal("placed: not an arena region")
}

// checkArena asserts that the arena holds exactly what valid segments put
// there. It may only run after the queue pair stopped (memory model).
func (s *hostileServer) checkArena() {
	s.t.Helper()
	<-s.qp.finished
	if !bytes.Equal(s.want, s.arena) {
		for i := range s.want {
			if s.want[i] != s.arena[i] {
				s.t.Fatalf("arena byte %d changed: want %#x, have %#x", i, s.want[i], s.arena[i])
			}
		}
	}
}

// rawPeer is an MPA initiator that speaks hand-built FPDUs.
type rawPeer struct {
	t   *testing.T
	c   net.Conn
	res *mpa.Result
	r   *mpa.Reader
}

func (s *hostileServer) dial(cfg mpa.Config) *rawPeer { return s.dialWith(cfg, nil) }

// dialWith dials with the given private data (an iwarp-go trailer makes
// the server use the extensions it declares).
func (s *hostileServer) dialWith(cfg mpa.Config, pd []byte) *rawPeer {
	s.t.Helper()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	require.NoError(s.t, err)
	s.t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := mpa.Connect(ctx, c, &cfg, pd)
	require.NoError(s.t, err)
	return &rawPeer{t: s.t, c: c, res: res, r: mpa.NewReader(c, mpa.ReaderConfig{CRC: res.CRC, Markers: res.RecvMarkers})}
}

// frame builds an FPDU around ulpdu: length, pad, CRC (or zero).
func (p *rawPeer) frame(ulpdu []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(ulpdu)))
	b = append(b, ulpdu...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	var c uint32
	if p.res.CRC {
		c = crc32.Checksum(b, castagnoli)
	}
	return binary.LittleEndian.AppendUint32(b, c)
}

func (p *rawPeer) send(ulpdus ...[]byte) {
	p.t.Helper()
	var b []byte
	for _, u := range ulpdus {
		b = append(b, p.frame(u)...)
	}
	p.sendRaw(b)
}

func (p *rawPeer) sendRaw(b []byte) {
	p.t.Helper()
	p.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := p.c.Write(b)
	require.NoError(p.t, err)
}

// next reads the next FPDU's ULPDU.
func (p *rawPeer) next() []byte {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	u, err := p.r.ReadFPDU(make([]byte, 1<<16))
	require.NoError(p.t, err)
	return u
}

// terminate reads FPDUs until a Terminate and returns its ULPDU.
func (p *rawPeer) terminate() []byte {
	p.t.Helper()
	for {
		u := p.next()
		if len(u) >= 2 && rdmap.ControlOpcode(u[1]) == rdmap.OpTerminate {
			return u
		}
	}
}

// wantTerminate is the Terminate ULPDU the table prescribes for c, built
// here byte by byte (RFC 5040 layout) from the table's code and flags.
func wantTerminate(c rdmap.Condition, ddpHdr []byte, segLen int, rr []byte) []byte {
	b := []byte{0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0}
	code := c.Code()
	m, d, r := c.Flags()
	var flags byte
	if m {
		flags |= 0x80
	}
	if d {
		flags |= 0x40
	}
	if r {
		flags |= 0x20
	}
	b = append(b, uint8(code.Layer())<<4|code.EType(), code.ECode(), flags, 0)
	if m || d {
		b = binary.BigEndian.AppendUint16(b, uint16(segLen))
	}
	if d {
		b = append(b, ddpHdr...)
	}
	if r {
		b = append(b, rr...)
	}
	return b
}

// ULPDU builders.
func uSend(op rdmap.Opcode, last bool, inv, qn, msn, mo uint32, payload []byte) []byte {
	b := ddp.AppendUntagged(nil, ddp.MakeControl(false, last), rdmap.MakeControl(op), inv, qn, msn, mo)
	return append(b, payload...)
}

func uTagged(op rdmap.Opcode, last bool, stag uint32, to uint64, payload []byte) []byte {
	b := ddp.AppendTagged(nil, ddp.MakeControl(true, last), rdmap.MakeControl(op), stag, to)
	return append(b, payload...)
}

func uReadReq(msn, mo uint32, f rdmap.ReadRequestFields) []byte {
	b := ddp.AppendUntagged(nil, ddp.MakeControl(false, true), rdmap.MakeControl(rdmap.OpReadRequest), 0, rdmap.QNReadRequest, msn, mo)
	return rdmap.AppendReadRequestBody(b, f)
}

func rrBody(f rdmap.ReadRequestFields) []byte { return rdmap.AppendReadRequestBody(nil, f) }

type hostileCase struct {
	name string
	cond rdmap.Condition
	opts []Option // listener options
	ext  bool     // the raw peer declares the extensions (an iwarp-go trailer)
	// run drives the case and returns the offending ULPDU's DDP header,
	// its segment length and (for Read Request source errors) the Read
	// Request header, as the Terminate must attach them.
	run func(s *hostileServer, p *rawPeer) (hdr []byte, segLen int, rr []byte)
}

// offending sends u as the offending FPDU, followed in the same write by a
// valid Write into rw that must never be placed.
func offending(s *hostileServer, p *rawPeer, u []byte) (hdr []byte, segLen int) {
	late := uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(1000).TO, []byte("must not be placed"))
	p.send(u, late)
	n := ddp.HeaderLen(ddp.Control(u[0]))
	return u[:min(n, len(u))], len(u)
}

func hostileCases() []hostileCase {
	payload := bytes.Repeat([]byte{0x5A}, 64)
	return []hostileCase{
		{name: "DDPVersionTagged", cond: rdmap.DDPVersionTagged, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			u := uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(0).TO, payload)
			u[0] = u[0]&^3 | 2
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		{name: "DDPVersionUntagged", cond: rdmap.DDPVersionUntagged, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			u := uSend(rdmap.OpSend, true, 0, 0, 1, 0, payload)
			u[0] &^= 3 // DDP version 0
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		{name: "SegmentTooShort", cond: rdmap.SegmentTooShort, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			u := uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), 0, nil)[:10]
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		{name: "UntaggedInvalidQN", cond: rdmap.UntaggedInvalidQN, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			h, n := offending(s, p, uSend(rdmap.OpSend, true, 0, 5, 1, 0, payload))
			return h, n, nil
		}},
		{name: "SendMSNRange", cond: rdmap.SendMSNRange, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			h, n := offending(s, p, uSend(rdmap.OpSend, true, 0, 0, 2, 0, payload))
			return h, n, nil
		}},
		{name: "SendMSNRange/interleaved", cond: rdmap.SendMSNRange, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			// A new Send while one is in progress (siw closes silently).
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			p.send(uSend(rdmap.OpSend, false, 0, 0, 1, 0, payload))
			s.placed(s.recv, 0, payload)
			h, n := offending(s, p, uSend(rdmap.OpSend, true, 0, 0, 2, 0, payload))
			return h, n, nil
		}},
		{name: "SendInvalidMO", cond: rdmap.SendInvalidMO, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			h, n := offending(s, p, uSend(rdmap.OpSend, true, 0, 0, 1, 8, payload))
			return h, n, nil
		}},
		{name: "SendNoBuffer", cond: rdmap.SendNoBuffer, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uSend(rdmap.OpSend, true, 0, 0, 1, 0, payload))
			return h, n, nil
		}},
		{name: "SendTooLong", cond: rdmap.SendTooLong, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, 63)}})
			h, n := offending(s, p, uSend(rdmap.OpSend, true, 0, 0, 1, 0, payload))
			return h, n, nil
		}},
		{name: "SendTooLong/huge", cond: rdmap.SendTooLong, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			// A maximal ULPDU is refused from its header, before its payload
			// is read: nothing is buffered for it.
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			h, n := offending(s, p, uSend(rdmap.OpSend, true, 0, 0, 1, 0, make([]byte, mpa.MaxULPDU-ddp.UntaggedHeaderLen)))
			return h, n, nil
		}},
		{name: "ReadReqMSNRange", cond: rdmap.ReadReqMSNRange, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uReadReq(2, 0, rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 8, SrcSTag: uint32(s.rw.STag()), SrcTO: s.rw.Remote(0).TO}))
			return h, n, nil
		}},
		{name: "ReadReqInvalidMO", cond: rdmap.ReadReqInvalidMO, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uReadReq(1, 4, rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 8, SrcSTag: uint32(s.rw.STag()), SrcTO: s.rw.Remote(0).TO}))
			return h, n, nil
		}},
		{name: "WriteInvalidSTag", cond: rdmap.WriteInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, 0x00ABCD00, 0, payload))
			return h, n, nil
		}},
		{name: "WriteInvalidSTag/key", cond: rdmap.WriteInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(s.rw.STag())^1, s.rw.Remote(0).TO, payload))
			return h, n, nil
		}},
		{name: "WriteInvalidSTag/invalidated", cond: rdmap.WriteInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			require.NoError(s.t, s.rw.Invalidate())
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(0).TO, payload))
			return h, n, nil
		}},
		{name: "WriteBaseBounds", cond: rdmap.WriteBaseBounds, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(regionLen-63).TO, payload))
			return h, n, nil
		}},
		{name: "WriteBaseBounds/below", cond: rdmap.WriteBaseBounds, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(0).TO-1, payload))
			return h, n, nil
		}},
		{name: "WriteSTagNotAssociated", cond: rdmap.WriteSTagNotAssociated, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(s.other.STag()), s.other.Remote(0).TO, payload))
			return h, n, nil
		}},
		{name: "WriteTOWrap", cond: rdmap.WriteTOWrap, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), ^uint64(0)-31, payload))
			return h, n, nil
		}},
		{name: "WriteAccessRights", cond: rdmap.WriteAccessRights, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(s.ro.STag()), s.ro.Remote(0).TO, payload))
			return h, n, nil
		}},
		{name: "TaggedSTagChanged", cond: rdmap.TaggedSTagChanged, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			p.send(uTagged(rdmap.OpWrite, false, uint32(s.rw.STag()), s.rw.Remote(0).TO, payload))
			s.placed(s.rw, 0, payload)
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(s.other.STag()), s.other.Remote(64).TO, payload))
			return h, n, nil
		}},
		{name: "TaggedTONotContiguous", cond: rdmap.TaggedTONotContiguous, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			p.send(uTagged(rdmap.OpWrite, false, uint32(s.rw.STag()), s.rw.Remote(0).TO, payload))
			s.placed(s.rw, 0, payload)
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(128).TO, payload))
			return h, n, nil
		}},
		{name: "ReadRespInvalidSTag", cond: rdmap.ReadRespInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			rr := s.postRead(p)
			h, n := offending(s, p, uTagged(rdmap.OpReadResponse, true, rr.SinkSTag()+0x100, rr.SinkTO(), payload))
			return h, n, nil
		}},
		{name: "ReadRespBaseBounds", cond: rdmap.ReadRespBaseBounds, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			rr := s.postRead(p)
			h, n := offending(s, p, uTagged(rdmap.OpReadResponse, true, rr.SinkSTag(), rr.SinkTO(), append(payload, 1)))
			return h, n, nil
		}},
		{name: "ReadRespBaseBounds/short", cond: rdmap.ReadRespBaseBounds, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			rr := s.postRead(p)
			h, n := offending(s, p, uTagged(rdmap.OpReadResponse, true, rr.SinkSTag(), rr.SinkTO(), payload[:32]))
			// The short segment is placed before its total length is known
			// to be wrong; nothing after it is.
			s.placed(s.rw, 0, payload[:32])
			return h, n, nil
		}},
		{name: "RDMAPVersion", cond: rdmap.RDMAPVersion, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			u := uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(0).TO, payload)
			u[1] = 2<<6 | u[1]&0x3f
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		{name: "UnexpectedOpcode", cond: rdmap.UnexpectedOpcode, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			// Opcode 8 (RFC 7306 Immediate Data), not negotiated.
			h, n := offending(s, p, uSend(rdmap.Opcode(8), true, 0, 0, 1, 0, make([]byte, 8)))
			return h, n, nil
		}},
		{name: "TaggedFlagMismatch", cond: rdmap.TaggedFlagMismatch, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			h, n := offending(s, p, uTagged(rdmap.OpSend, true, uint32(s.rw.STag()), 0, payload))
			return h, n, nil
		}},
		{name: "ReadRespUnexpected", cond: rdmap.ReadRespUnexpected, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uTagged(rdmap.OpReadResponse, true, uint32(s.rw.STag()), s.rw.Remote(0).TO, payload))
			return h, n, nil
		}},
		{name: "ReadReqIRDExceeded", cond: rdmap.ReadReqIRDExceeded, opts: []Option{WithIRDORD(1, 1)}, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			// The first Read's response cannot be sent while the peer does
			// not read (64 MiB exceed the socket buffers), so its IRD slot
			// stays taken when the second Request arrives.
			big, err := s.pd.Register(make([]byte, 64<<20), RemoteRead)
			require.NoError(s.t, err)
			f := rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 64 << 20, SrcSTag: uint32(big.STag()), SrcTO: big.Remote(0).TO}
			p.send(uReadReq(1, 0, f))
			time.Sleep(50 * time.Millisecond) // let the response start
			h, n := offending(s, p, uReadReq(2, 0, f))
			return h, n, nil
		}},
		{name: "ReadReqMalformed/payload", cond: rdmap.ReadReqMalformed, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			u := append(uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 8, SrcSTag: uint32(s.rw.STag()), SrcTO: s.rw.Remote(0).TO}), 1, 2, 3, 4)
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		{name: "ReadReqMalformed/notlast", cond: rdmap.ReadReqMalformed, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			u := uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 8, SrcSTag: uint32(s.rw.STag()), SrcTO: s.rw.Remote(0).TO})
			u[0] &^= byte(ddp.FlagLast)
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		{name: "ReadReqMalformed/sinkwrap", cond: rdmap.ReadReqMalformed, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			// A sink range ending exactly at 2^64: the response's segments
			// would fail the requester's TO-wrap check (RFC 5041 §7.1
			// tagged check 5), so the request is refused before any byte.
			f := rdmap.ReadRequestFields{SinkSTag: 0x1234, SinkTO: ^uint64(0) - 7, Size: 8, SrcSTag: uint32(s.rw.STag()), SrcTO: s.rw.Remote(0).TO}
			h, n := offending(s, p, uReadReq(1, 0, f))
			return h, n, nil
		}},
		{name: "ReadReqSourceInvalidSTag", cond: rdmap.ReadReqSourceInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			f := rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 8, SrcSTag: uint32(s.rw.STag()) ^ 0x80, SrcTO: s.rw.Remote(0).TO}
			h, n := offending(s, p, uReadReq(1, 0, f))
			return h, n, rrBody(f)
		}},
		{name: "ReadReqSourceBaseBounds", cond: rdmap.ReadReqSourceBaseBounds, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			f := rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 8, SrcSTag: uint32(s.rw.STag()), SrcTO: s.rw.Remote(regionLen - 7).TO}
			h, n := offending(s, p, uReadReq(1, 0, f))
			return h, n, rrBody(f)
		}},
		{name: "ReadReqSourceAccessRights", cond: rdmap.ReadReqSourceAccessRights, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			f := rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 8, SrcSTag: uint32(s.recv.STag()), SrcTO: s.recv.Remote(0).TO}
			h, n := offending(s, p, uReadReq(1, 0, f))
			return h, n, rrBody(f)
		}},
		{name: "ReadReqSourceNotAssociated", cond: rdmap.ReadReqSourceNotAssociated, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			f := rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 8, SrcSTag: uint32(s.other.STag()), SrcTO: s.other.Remote(0).TO}
			h, n := offending(s, p, uReadReq(1, 0, f))
			return h, n, rrBody(f)
		}},
		{name: "ReadReqSourceTOWrap", cond: rdmap.ReadReqSourceTOWrap, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			f := rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 64, SrcSTag: uint32(s.rw.STag()), SrcTO: ^uint64(0) - 31}
			h, n := offending(s, p, uReadReq(1, 0, f))
			return h, n, rrBody(f)
		}},
		{name: "SendInvCannotInvalidate", cond: rdmap.SendInvCannotInvalidate, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			h, n := offending(s, p, uSend(rdmap.OpSendInvalidate, true, 0x00ABCD00, 0, 1, 0, payload))
			s.placed(s.recv, 0, payload) // placed before the invalidation fails
			return h, n, nil
		}},
		{name: "SendInvProtection", cond: rdmap.SendInvProtection, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
			h, n := offending(s, p, uSend(rdmap.OpSendSEInvalidate, true, uint32(s.other.STag()), 0, 1, 0, payload))
			s.placed(s.recv, 0, payload)
			return h, n, nil
		}},
		{name: "CRCError", cond: rdmap.CRCError, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			require.True(s.t, p.res.CRC)
			f := p.frame(uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(0).TO, payload))
			f[len(f)-1] ^= 0x40
			p.sendRaw(append(f, p.frame(uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(1000).TO, payload))...))
			// RFC 5044 §6: the FPDU is verified before DDP sees it, so
			// not one byte of the damaged Write lands (the arena check
			// finds the region as it was), and nothing after it.
			return nil, 0, nil
		}},
		{name: "MarkerMismatch", cond: rdmap.MarkerMismatch, opts: []Option{WithMarkers()}, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			require.True(s.t, p.res.SendMarkers)
			var buf bytes.Buffer
			w := mpa.NewWriter(&buf, mpa.WriterConfig{CRC: p.res.CRC, Markers: true})
			u := uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(0).TO, payload)
			require.NoError(s.t, w.WriteFPDU(u[:14], u[14:]))
			require.NoError(s.t, w.Flush())
			b := buf.Bytes()
			require.Equal(s.t, []byte{0, 0, 0, 0}, b[:4], "a marker opens the first FPDU")
			b[3] = 8 // FPDUPTR pointing elsewhere
			p.sendRaw(b)
			return nil, 0, nil
		}},
	}
}

// postRead makes the server issue an RDMA Read of 64 bytes into rw and
// returns the Read Request it sent. The raw peer first sends a zero-length
// Write so that the responder may transmit.
func (s *hostileServer) postRead(p *rawPeer) rdmap.ReadRequest {
	s.t.Helper()
	require.NoError(s.t, s.qp.PostSend(SendWR{ID: 9, Op: OpRead, Flags: Signaled, SGL: []SGE{s.rw.SGE(0, 64)}, Remote: RemoteAddr{STag: 0x4242, TO: 0x1000}}))
	p.send(uTagged(rdmap.OpWrite, true, 1, 0, nil))
	u := p.next()
	h, err := rdmap.Parse(u, len(u))
	require.NoError(s.t, err)
	require.Equal(s.t, rdmap.OpReadRequest, h.Op)
	rr := h.ReadRequest()
	require.Equal(s.t, uint32(64), rr.Size())
	require.Equal(s.t, uint32(0x4242), rr.SrcSTag())
	return append(rdmap.ReadRequest(nil), rr...)
}

func TestHostile_TerminateTable(t *testing.T) {
	for _, hc := range allHostileCases() {
		t.Run(hc.name, func(t *testing.T) {
			checkLeaks(t)
			s := newHostileServer(t, hc.opts...)
			var trailer []byte
			if hc.ext {
				trailer = appendPeerTrailer(nil)
			}
			p := s.dialWith(mpa.Config{IRD: 1, ORD: 1, RequestMarkers: false}, trailer)
			hdr, segLen, rr := hc.run(s, p)
			got := p.terminate()
			require.Equal(t, wantTerminate(hc.cond, hdr, segLen, rr), got, "Terminate ULPDU for %v", hc.cond)
			// The stream ends after the Terminate.
			p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := p.r.Next()
			require.Error(t, err)

			<-s.qp.Done()
			var te *rdmap.TerminateError
			require.True(t, errors.As(s.qp.Err(), &te), "QP error %v", s.qp.Err())
			require.False(t, te.Remote)
			require.Equal(t, hc.cond.Code(), te.Code)
			s.checkArena()
			// Every posted work request completed with an error.
			var wcs [8]WorkCompletion
			for _, wc := range wcs[:s.cq.Poll(wcs[:])] {
				require.NotEqual(t, WCSuccess, wc.Status)
				require.Error(t, wc.Err())
			}
		})
	}
}

// TestHostile_EveryConditionCovered ties the suite to the table: every
// condition has a case above, or is listed here with why a peer cannot
// provoke it.
func TestHostile_EveryConditionCovered(t *testing.T) {
	exempt := map[rdmap.Condition]string{
		rdmap.DDPLocalCatastrophic:   "local failure to place a checked segment; no input provokes it",
		rdmap.RDMAPLocalCatastrophic: "local failure not tied to a segment",
		rdmap.ConnectionLost:         "the peer is gone; TestHostile_TornStream checks the local error",
		rdmap.FPDULengthInvalid:      "the receive limit is MPA's 16-bit maximum, which no length field exceeds",
		rdmap.MPALocalCatastrophic:   "defined, never sent",
		rdmap.InvalidMPAFrame:        "initiator side: TestHostile_InitiatorSetupTerminates",
		rdmap.InsufficientIRD:        "initiator side: TestHostile_InitiatorSetupTerminates",
		rdmap.NoMatchingRTR:          "initiator side: TestHostile_InitiatorSetupTerminates",
	}
	covered := map[rdmap.Condition]bool{}
	for _, hc := range allHostileCases() {
		covered[hc.cond] = true
	}
	for _, c := range rdmap.Conditions() {
		_, ex := exempt[c]
		require.True(t, covered[c] || ex, "condition %v has no hostile case", c)
		require.False(t, covered[c] && ex, "condition %v both covered and exempt", c)
	}
}

// TestHostile_TornStream: a peer that stops in the middle of an FPDU ends
// the connection with a local "connection lost" error; nothing is placed.
func TestHostile_TornStream(t *testing.T) {
	checkLeaks(t)
	s := newHostileServer(t)
	p := s.dial(mpa.Config{IRD: 1, ORD: 1})
	f := p.frame(uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(0).TO, bytes.Repeat([]byte{1}, 1000)))
	p.sendRaw(f[:500])
	p.c.(*net.TCPConn).CloseWrite()
	<-s.qp.Done()
	require.ErrorIs(t, s.qp.Err(), ErrConnectionLost)
	var coded termcode.Code
	require.True(t, errors.As(s.qp.Err(), &coded))
	require.Equal(t, rdmap.ConnectionLost.Code(), coded)
	// Part of the payload may have been placed (the region is the Write's
	// target); nothing outside it.
	for i := 0; i < len(s.arena); i++ {
		if i >= guardLen && i < guardLen+1000 {
			continue
		}
		require.Equal(t, s.want[i], s.arena[i], "byte %d", i)
	}
}

// TestHostile_ReceivedTerminate_BothLayouts: a Terminate from the peer, in
// the RFC layout or siw's, ends the connection and is reported with both
// readings.
func TestHostile_ReceivedTerminate_BothLayouts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		word   []byte
		layout rdmap.Layout
		code   termcode.Code
	}{
		{"rfc", []byte{0x20, 0x02, 0x00, 0x00}, rdmap.LayoutRFC, 0x2002},
		{"siw", []byte{0x02, 0x02, 0x00, 0x00}, rdmap.LayoutSIW, 0x2002},
		{"siw-ddp", []byte{0x11, 0x00, 0x03, 0x00, 0x00, 0x40}, rdmap.LayoutSIW, 0x1100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			s := newHostileServer(t)
			s.qp.PostRecv(RecvWR{ID: 3})
			p := s.dial(mpa.Config{IRD: 1, ORD: 1})
			u := append([]byte{0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0}, tc.word...)
			p.send(u)
			<-s.qp.Done()
			var te *rdmap.TerminateError
			require.True(t, errors.As(s.qp.Err(), &te), "%v", s.qp.Err())
			require.True(t, te.Remote)
			require.Equal(t, tc.code, te.Code)
			require.Equal(t, tc.layout, te.Received.Layout)
			require.Equal(t, tc.word[:4], te.Received.Control[:])
			wc := s.wait(t)
			require.Equal(t, WCWRFlushErr, wc.Status)
			require.ErrorAs(t, wc.Err(), &te)
			// A received Terminate is never answered with one: the stream
			// ends with nothing more from this side (siw, irdma and cxgb4
			// behave so; docs/rfc-notes/terminate.md).
			p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := p.r.ReadFPDU(make([]byte, 1<<16))
			require.ErrorIs(t, err, io.EOF, "no FPDU after the peer's Terminate")
			s.checkArena()
		})
	}
}

func (s *hostileServer) wait(t *testing.T) WorkCompletion {
	ep := &endpoint{cq: s.cq}
	return ep.wait(t)
}

// TestHostile_InitiatorSetupTerminates: an initiator that cannot accept the
// Reply reports why with a Terminate (RFC 6581) and fails the connection.
func TestHostile_InitiatorSetupTerminates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cond  rdmap.Condition
		reply []byte
		opts  []Option
	}{
		{"InvalidMPAFrame", rdmap.InvalidMPAFrame, append([]byte("MPA ID Bad Frame"), 0x10, 2, 0, 4, 0, 16, 0, 16), nil},
		{"InsufficientIRD", rdmap.InsufficientIRD, append([]byte(mpa.ReplyKey), 0x10, 2, 0, 4, 0, 16, 0, 64), []Option{WithIRDORD(16, 16), WithoutP2P()}},
		{"NoMatchingRTR", rdmap.NoMatchingRTR, append([]byte(mpa.ReplyKey), 0x10, 2, 0, 4, 0x80, 0, 0x40, 16), []Option{WithP2P(RTRWrite)}}, // Read named, responder IRD 0: no RTR the initiator can send (RFC 6581 §9.2)
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer ln.Close()
			got := make(chan []byte, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- nil
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := mpa.ReadFrame(c, mpa.MaxPrivateData); err != nil {
					got <- nil
					return
				}
				c.Write(tc.reply)
				u, err := mpa.NewReader(c, mpa.ReaderConfig{}).ReadFPDU(make([]byte, 256))
				if err != nil {
					got <- []byte("closed") // EOF or reset: no FPDU
					return
				}
				got <- append([]byte(nil), u...)
			}()
			ep := newEndpoint(t, QPCaps{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = ep.qp.Connect(ctx, "tcp", ln.Addr().String(), tc.opts...)
			require.Error(t, err)
			var coded termcode.Code
			require.True(t, errors.As(err, &coded), "%v", err)
			require.Equal(t, tc.cond.Code(), coded)
			if tc.cond == rdmap.InvalidMPAFrame {
				// RFC 5044 §7.1.2 rule 3: an improperly formatted Reply
				// closes the connection; no FPDU is sent.
				require.Equal(t, "closed", string(<-got))
			} else {
				require.Equal(t, wantTerminate(tc.cond, nil, 0, nil), <-got)
			}
			<-ep.qp.Done()
		})
	}
}

// TestHostile_InitiatorTornReplySendsNoTerminate: a Reply that ends in the
// middle (the responder's half of the stream closed) is a lost connection
// (RFC 5044 §8 code 1), reported locally: only the RFC 6581 §9.1 and §9.2
// refusals are sent to the responder as a Terminate. The initiator closes
// its side without writing anything after its Request.
func TestHostile_InitiatorTornReplySendsNoTerminate(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	after := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			after <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(hangLimit))
		if _, err := mpa.ReadFrame(c, mpa.MaxPrivateData); err != nil {
			after <- nil
			return
		}
		reply := append([]byte(mpa.ReplyKey), 0x50, 2, 0, 4, 0, 16, 0, 16)
		c.Write(reply[:len(reply)-3])
		c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		after <- b
	}()
	ep := newEndpoint(t, QPCaps{})
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	err = ep.qp.Connect(ctx, "tcp", ln.Addr().String())
	require.ErrorIs(t, err, mpa.ErrConnectionLost)
	require.Empty(t, <-after, "bytes sent after the Request")
	<-ep.qp.Done()
}

var _ = stag.OK
