package dissect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/netip"
	"sort"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// dirData is one direction's reassembled bytes and where they came from.
type dirData struct {
	data     []byte
	frameAt  func(off int) int // nil when frames are unknown
	src, dst netip.AddrPort
}

// DecodeStreams dissects one connection given as its two byte streams:
// up from the client, down from the server, each from its first octet.
// Frame numbers are unknown and left out.
func DecodeStreams(up, down []byte) *Stream {
	return decodeConn(0, [2]dirData{{data: up}, {data: down}}, 0)
}

// fromCapture dissects a connection reassembled by internal/capture.
func fromCapture(i int, c *capture.Conn) *Stream {
	dir := func(st *capture.Stream) dirData {
		return dirData{data: st.Data, frameAt: st.FrameAt, src: st.Src, dst: st.Dst}
	}
	s := decodeConn(i, [2]dirData{dir(c.Up), dir(c.Down)}, c.FirstFrame)
	for d, st := range [2]*capture.Stream{c.Up, c.Down} {
		dd := &s.Directions[d]
		dd.SYN, dd.FIN, dd.RST, dd.Hole = st.SYN, st.FIN, st.RST, st.Truncated
		if st.Truncated {
			s.note(Dir(d), st.FrameAt(len(st.Data)-1), len(st.Data),
				"the capture misses segments after stream offset %d; the rest of this direction is not decoded", len(st.Data))
		}
		if !st.SYN && d == int(Up) {
			s.note(Up, c.FirstFrame, 0, "no SYN captured: the capture may start after the connection was set up")
		}
	}
	return s
}

func decodeConn(index int, dirs [2]dirData, firstFrame int) *Stream {
	s := &Stream{
		Index:      index,
		Client:     dirs[Up].src,
		Server:     dirs[Up].dst,
		FirstFrame: firstFrame,
	}
	for d := range dirs {
		s.Directions[d] = Direction{Src: dirs[d].src, Dst: dirs[d].dst, Bytes: len(dirs[d].data)}
	}
	defer s.sortPDUs()

	// The initiator's stream opens with the Request. That is normally the
	// client's, but a capture that missed the SYN may have the roles
	// swapped.
	ini := Up
	if !hasKey(dirs[Up].data, mpa.RequestKey) && hasKey(dirs[Down].data, mpa.RequestKey) {
		ini = Down
	}
	res := 1 - ini
	s.Initiator = ini

	req, reqLen := s.handshake(ini, &dirs[ini])
	if req == nil || req.Kind != "request" {
		s.Request = nil
		s.State = StateNoHandshake
		s.note(Up, 0, 0, "no MPA Request opens either direction: nothing is decoded")
		return s
	}
	s.Request = req
	if reqLen < 0 {
		s.State = StateRequestOnly
		s.note(ini, req.lastFrame(), 0, "the capture ends inside the MPA Request")
		return s
	}
	rep, repLen := s.handshake(res, &dirs[res])
	if rep == nil || rep.Kind != "reply" || repLen < 0 {
		s.State = StateRequestOnly
		switch {
		case rep != nil && rep.Kind != "reply":
			s.Reply = nil
			s.note(res, rep.lastFrame(), 0, "the responder's stream opens with an MPA Request, not a Reply")
		case rep != nil:
			s.Reply = rep
			s.note(res, rep.lastFrame(), 0, "the capture ends inside the MPA Reply")
		case len(dirs[res].data) > 0:
			s.note(res, frameOf(&dirs[res], 0), 0, "the responder's stream does not open with an MPA Reply")
		default:
			s.note(res, 0, 0, "no MPA Reply in the capture")
		}
		if extra := len(dirs[ini].data) - reqLen; extra > 0 {
			s.note(ini, frameOf(&dirs[ini], reqLen), reqLen, "%d octets after the Request are not decoded", extra)
		}
		return s
	}
	s.Reply = rep
	if rep.R {
		s.State = StateRejected
		for _, d := range [2]Dir{ini, res} {
			base := reqLen
			if d == res {
				base = repLen
			}
			if extra := len(dirs[d].data) - base; extra > 0 {
				s.note(d, frameOf(&dirs[d], base), base, "%d octets follow a rejected setup; not decoded", extra)
			}
		}
		return s
	}

	// CRC is on in both directions when the Reply's C bit is set: the
	// responder decides, as package mpa (Result.CRC) and siw have it.
	// Wireshark uses CRC when either frame has C set; the note flags the
	// one case where the two readings differ. Each side's M bit asks for
	// markers in the stream it receives (RFC 5044 §7.1, as package mpa
	// reads it).
	s.State = StateEstablished
	crc := rep.C
	if req.C && !rep.C {
		s.note(res, rep.lastFrame(), 0, "the Request asks for CRC and the Reply declines: decoded without CRC, as the Reply says")
	}
	s.Directions[ini].CRC, s.Directions[res].CRC = crc, crc
	s.Directions[ini].Markers, s.Directions[res].Markers = rep.M, req.M
	s.fpdus(ini, &dirs[ini], reqLen, crc, rep.M)
	s.fpdus(res, &dirs[res], repLen, crc, req.M)
	return s
}

func hasKey(b []byte, key string) bool {
	return len(b) >= mpa.KeyLen && string(b[:mpa.KeyLen]) == key
}

// handshake decodes the Request or Reply that opens a direction. It
// returns nil if the direction does not open with a key, and a length of
// -1 if the capture ends inside the frame.
func (s *Stream) handshake(d Dir, dd *dirData) (*Handshake, int) {
	b := dd.data
	if len(b) < mpa.KeyLen {
		return nil, 0
	}
	h := &Handshake{Dir: d}
	switch mpa.Header(b).Kind() {
	case mpa.KindRequest:
		h.Kind = "request"
	case mpa.KindReply:
		h.Kind = "reply"
	default:
		return nil, 0
	}
	if len(b) < mpa.FrameHeaderLen {
		h.Frames = frames(dd, 0, len(b))
		return h, -1
	}
	hdr := mpa.Header(b[:mpa.FrameHeaderLen])
	fl := hdr.Flags()
	h.Rev, h.Flags = hdr.Rev(), Hex8(fl)
	h.M, h.C, h.R = fl&mpa.FlagMarkers != 0, fl&mpa.FlagCRC != 0, fl&mpa.FlagReject != 0
	h.Enhanced, h.Reserved = fl&mpa.FlagEnhanced != 0, uint8(fl&mpa.FlagsReserved)
	h.PDLength = hdr.PDLength()
	n := mpa.FrameHeaderLen + h.PDLength
	if len(b) < n {
		h.PrivateData = Bytes(bytes.Clone(b[mpa.FrameHeaderLen:]))
		h.Frames = frames(dd, 0, len(b))
		return h, -1
	}
	h.Frames = frames(dd, 0, n)
	h.PrivateData = Bytes(bytes.Clone(b[mpa.FrameHeaderLen:n]))
	f, _, err := mpa.ParseFrame(b[:n])
	if err != nil {
		h.Error = err.Error()
		return h, n
	}
	if f.HasIRDORD {
		v := f.IRDORD
		h.IRDORD = &IRDORD{IRD: v.IRD, ORD: v.ORD, P2P: v.P2P}
		if v.RTR != 0 {
			h.IRDORD.RTR = v.RTR.String()
		}
	}
	h.AppData = Bytes(bytes.Clone(f.PrivateData))
	return h, n
}

func (h *Handshake) lastFrame() int {
	if len(h.Frames) == 0 {
		return 0
	}
	return h.Frames[len(h.Frames)-1]
}

// fpdus decodes one direction's FPDU stream, which starts at base, with the
// mpa.Reader the live stack uses. Offsets reported are stream offsets,
// markers counted; the Reader sees the stream without them.
func (s *Stream) fpdus(d Dir, dd *dirData, base int, crc, markers bool) {
	data := dd.data[base:]
	// A capture is decoded past CRC errors so that every FPDU is reported;
	// a connection stops at the first one (RFC 5044 §8).
	r := mpa.NewReader(bytes.NewReader(data), mpa.ReaderConfig{CRC: crc, Markers: markers, BufferSize: readerBuffer,
		ContinueAfterCRCError: true})
	m := markerMap(markers)
	total := m.logicalLen(len(data))
	chk := newChecker()
	// A siw receiver's trailer buffer, carried from FPDU to FPDU.
	var siw SiwTrailer
	for pos := 0; ; { // pos: logical offset of the next FPDU
		n, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		start := base + m.rawStart(pos)
		if err != nil {
			if errors.Is(err, mpa.ErrConnectionLost) {
				s.note(d, frameOf(dd, start), start, "the capture ends inside an FPDU's length field")
			} else {
				s.note(d, frameOf(dd, start), start, "framing lost: %v", err)
			}
			return
		}
		f := &FPDU{Dir: d, Offset: start, ULPDULength: n, Pad: mpa.FPDULen(n) - n - 6}
		next := pos + mpa.FPDULen(n)
		avail := total - pos - 2 // captured ULPDU, pad and CRC octets
		hdr, err := r.Peek(min(n, mpa.MaxPeek, max(avail, 0)))
		if err != nil {
			s.note(d, frameOf(dd, start), start, "reading the FPDU header: %v", err)
			return
		}
		hdr = bytes.Clone(hdr)
		end := base + m.rawEnd(next)
		f.Truncated = next > total
		if f.Truncated {
			end = len(dd.data)
		}
		f.Len = end - start
		f.Markers = m.count(start-base, end-base)
		f.Frames = frames(dd, start, end)
		h, hok := decodeHeader(f, hdr, n)
		s.PDUs = append(s.PDUs, f)
		if f.Truncated {
			f.CRC = CRCMissing
			s.note(d, f.LastFrame(), start, "the capture ends inside this FPDU: %d of %d octets", f.Len, m.rawEnd(next)-m.rawStart(pos))
			return
		}
		s.Directions[d].FPDUs++
		f.CRCField = Bytes(bytes.Clone(dd.data[end-4 : end]))
		switch err := r.End(); {
		case err == nil && crc:
			f.CRC = CRCGood
		case err == nil:
			f.CRC = CRCAbsent
		case errors.Is(err, mpa.ErrCRC):
			f.CRC = CRCBad
			f.CRCComputed = binary.LittleEndian.AppendUint32(nil, crc32.Checksum(dd.data[start:end-4], castagnoli))
		default:
			s.note(d, f.LastFrame(), start, "framing lost: %v", err)
			return
		}
		if !markers { // siw has no markers, and a marker may split the field itself
			s.siwTrailer(d, dd, f, &siw, start, end, crc)
		}
		if msg := chk.check(h, hok, n); msg != "" {
			s.note(d, f.LastFrame(), start, "%s", msg)
		}
		pos = next
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readerBuffer is the mpa.Reader buffer per direction: the stream is in
// memory already, so a small one costs nothing but copies.
const readerBuffer = 16 << 10

// decodeHeader fills the DDP and RDMAP fields of f from hdr, the first
// octets of an n-octet ULPDU (all of them up to mpa.MaxPeek, fewer if the
// capture ends first). It returns the parsed header and whether it is
// well formed.
func decodeHeader(f *FPDU, hdr []byte, n int) (rdmap.Header, bool) {
	if len(hdr) > 0 {
		c := ddp.Control(hdr[0])
		f.Tagged, f.Last, f.DDPVersion = c.Tagged(), c.Last(), c.Version()
		if c.Tagged() {
			if h, ok := ddp.ParseTagged(hdr); ok {
				stag, to := Hex32(h.STag()), Hex64(h.TO())
				f.STag, f.TO = &stag, &to
			}
		} else if h, ok := ddp.ParseUntagged(hdr); ok {
			qn, msn, mo := h.QN(), h.MSN(), h.MO()
			f.QN, f.MSN, f.MO = &qn, &msn, &mo
		}
	}
	if len(hdr) > 1 {
		op := rdmap.ControlOpcode(hdr[1])
		f.RDMAPVersion, f.Opcode, f.Op = rdmap.ControlVersion(hdr[1]), uint8(op), op.String()
	}
	if len(hdr) < min(n, headerLen(hdr)) {
		f.Error = "header not captured"
		return rdmap.Header{}, false
	}
	h, err := rdmap.ParseWith(hdr, n, rdmap.AllExtensions)
	if err != nil {
		f.Error = describe(err)
		return rdmap.Header{}, false
	}
	if ar := h.AtomicRequest(); ar != nil {
		v := ar.Fields()
		f.AtomicRequest = &AtomicRequest{Op: v.Op.String(), ID: v.ID, STag: Hex32(v.STag), TO: Hex64(v.TO),
			AddSwap: Hex64(v.Args.AddSwap), AddSwapMask: Hex64(v.Args.AddSwapMask), Compare: Hex64(v.Args.Compare), CompareMask: Hex64(v.Args.CompareMask)}
	}
	if r := h.AtomicResponse(); r != nil {
		f.AtomicResponse = &AtomicResponse{ID: r.ID(), Orig: Hex64(r.Orig())}
	}
	if v, ok := h.Immediate(); ok {
		x := Hex64(v)
		f.Immediate = &x
	}
	f.PayloadLen = h.PayloadLen
	if h.Op.Invalidates() {
		v := Hex32(h.InvalidateSTag())
		f.InvalidateSTag = &v
	}
	if rr := h.ReadRequest(); rr != nil {
		v := rr.Fields()
		f.ReadRequest = &ReadRequest{SinkSTag: Hex32(v.SinkSTag), SinkTO: Hex64(v.SinkTO), Size: v.Size, SrcSTag: Hex32(v.SrcSTag), SrcTO: Hex64(v.SrcTO)}
	}
	if h.Op == rdmap.OpTerminate {
		// Everything after a Terminate's DDP header is Terminate.
		f.Terminate = terminate(hdr)
		f.PayloadLen = 0
	}
	return h, true
}

// headerLen is how many octets of a ULPDU starting with hdr its header
// takes: the fixed header of its opcode (rdmap.Opcode.HeaderLen), the DDP
// header alone for an opcode without one, and as much as possible while
// the opcode is not captured.
func headerLen(hdr []byte) int {
	if len(hdr) < 2 {
		return rdmap.MaxHeaderLen
	}
	if n := rdmap.ControlOpcode(hdr[1]).HeaderLen(); n > 0 {
		return n
	}
	return ddp.HeaderLen(ddp.Control(hdr[0]))
}

func terminate(b []byte) *Terminate {
	rt, err := rdmap.ParseTerminate(b)
	if err != nil {
		return nil
	}
	t := &Terminate{
		Raw:        Bytes(b[ddp.UntaggedHeaderLen:]),
		Control:    Bytes(rt.Control[:]),
		RFC:        reading(rt.RFC),
		SIW:        reading(rt.SIW),
		Layout:     rt.Layout.String(),
		DDPHeader:  Bytes(rt.DDPHeader),
		RDMAHeader: Bytes(rt.RDMAHeader),
		Trailing:   Bytes(rt.Trailing),
		Conforming: rt.Conforming(),
	}
	if rt.SegmentLenPresent {
		v := rt.SegmentLen
		t.SegmentLen = &v
	}
	return t
}

// describe renders a header error with the Terminate a receiver sends.
func describe(err error) string {
	if c, ok := termcode.Of(err); ok {
		return fmt.Sprintf("%v; a receiver terminates with %v", err, c)
	}
	return err.Error()
}

// checker runs the receive-side sequencing checks of package ddp over one
// direction: MSN and MO per untagged queue, STag and TO continuity within a
// tagged message. After the first failure it stays quiet: a receiver
// would have terminated there.
type checker struct {
	untagged *ddp.UntaggedQueues
	tagged   ddp.TaggedReceiver
	failed   bool
}

func newChecker() *checker { return &checker{untagged: ddp.NewUntaggedQueues(rdmap.NumQueues)} }

func (c *checker) check(h rdmap.Header, ok bool, n int) string {
	if c.failed || !ok {
		return ""
	}
	var err error
	if tg := h.Tagged(); tg != nil {
		_, err = c.tagged.Receive(tg, n)
	} else {
		_, err = c.untagged.Receive(h.Untagged(), n, math.MaxInt32)
	}
	if err != nil {
		c.failed = true
		return "receive check fails: " + describe(err)
	}
	return ""
}

// siwTrailer records whether the pad and CRC field of f, stream octets
// up to end, arrived in two frames, and notes on a CRC stream what siw
// then logs (SiwTrailer). siw carries the trailer buffer from one FPDU
// to the next.
func (s *Stream) siwTrailer(d Dir, dd *dirData, f *FPDU, siw *SiwTrailer, start, end int, crc bool) {
	t := end - 4 - f.Pad
	if dd.frameAt != nil {
		for o, first := t+1, dd.frameAt(t); o < end; o++ {
			if dd.frameAt(o) != first {
				f.TrailerSplit = o - t
				break
			}
		}
	}
	siw.Read(dd.data[t:end], f.TrailerSplit)
	if f.TrailerSplit == 0 || !crc {
		return
	}
	if in, own := siwCRCLog(siw, dd.data[start:t], f.Pad); in != own {
		s.note(d, f.LastFrame(), start, "the pad and CRC field spans frames %d and %d (%d|%d octets): siw (Linux 6.1 and later) "+
			"receiving them in two socket buffers misreads the field and ends the connection with \"siw: crc error. in: %08x, own %08x\"",
			dd.frameAt(t), dd.frameAt(end-1), f.TrailerSplit, end-t-f.TrailerSplit, in, own)
	}
}

// frames lists the frames that carried stream octets [start, end).
func frames(dd *dirData, start, end int) []int {
	if dd.frameAt == nil || start >= end {
		return nil
	}
	var out []int
	for off := start; off < end; off++ {
		if fr := dd.frameAt(off); fr != 0 && (len(out) == 0 || out[len(out)-1] != fr) {
			out = append(out, fr)
		}
	}
	return out
}

func frameOf(dd *dirData, off int) int {
	if dd.frameAt == nil {
		return 0
	}
	return dd.frameAt(off)
}

func (s *Stream) note(d Dir, frame, off int, format string, args ...any) {
	s.Notes = append(s.Notes, Note{Dir: d, Frame: frame, Offset: off, Text: fmt.Sprintf(format, args...)})
}

// sortPDUs puts the FPDUs of both directions in capture order.
func (s *Stream) sortPDUs() {
	sort.SliceStable(s.PDUs, func(i, j int) bool { return s.PDUs[i].LastFrame() < s.PDUs[j].LastFrame() })
}
