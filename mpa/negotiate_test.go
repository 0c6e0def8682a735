package mpa

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// negotiate runs both roles through the pure functions, passing the frames
// through their wire encoding as a real exchange would.
func negotiate(t *testing.T, ini, resp *Config, reqPD, repPD []byte) (Result, Result, error) {
	t.Helper()
	req, err := BuildRequest(ini, reqPD)
	if err != nil {
		return Result{}, Result{}, err
	}
	req = wire(t, req)
	rep, rres, err := AnswerRequest(resp, &req, repPD)
	if err != nil {
		return Result{}, rres, err
	}
	rep = wire(t, rep)
	ires, err := CheckReply(ini, &req, &rep)
	return ires, rres, err
}

func wire(t *testing.T, f Frame) Frame {
	t.Helper()
	b, err := AppendFrame(nil, &f)
	require.NoError(t, err)
	g, n, err := ParseFrame(b)
	require.NoError(t, err)
	require.Equal(t, len(b), n)
	return g
}

func code(t *testing.T, err error) termcode.Code {
	t.Helper()
	var pe *Error
	require.ErrorAs(t, err, &pe)
	return pe.Code
}

func TestNegotiate_DefaultsMatchSiwInitiator(t *testing.T) {
	// A zero Config builds what siw sends for rping, plus C (CRC preferred).
	req, err := BuildRequest(&Config{IRD: 1, ORD: 1}, nil)
	require.NoError(t, err)
	b, err := AppendFrame(nil, &req)
	require.NoError(t, err)
	require.Equal(t, testutil.Unhex(t, reqKeyHex+"50 02 00 04 00 01 00 01"), b)

	req, err = BuildRequest(&Config{IRD: 1, ORD: 1, CRC: CRCOff}, nil)
	require.NoError(t, err)
	b, err = AppendFrame(nil, &req)
	require.NoError(t, err)
	require.Equal(t, testutil.Unhex(t, reqKeyHex+"10 02 00 04 00 01 00 01"), b, "siw's own rping Request")
}

func TestNegotiate_RFC5044_7_1_CRCModes(t *testing.T) {
	// CRC is in use when either frame has C; Required initiators also fail
	// on a Reply without it.
	for _, tc := range []struct {
		ini, resp CRCMode
		crc       bool
		err       error
	}{
		{CRCOff, CRCOff, false, nil},
		{CRCOff, CRCPreferred, true, nil}, // responder decides
		{CRCOff, CRCRequired, true, nil},
		{CRCPreferred, CRCOff, true, nil}, // responder follows the request's C
		{CRCPreferred, CRCPreferred, true, nil},
		{CRCPreferred, CRCRequired, true, nil},
		{CRCRequired, CRCOff, true, nil},
		{CRCRequired, CRCRequired, true, nil},
	} {
		ires, rres, err := negotiate(t, &Config{CRC: tc.ini}, &Config{CRC: tc.resp}, nil, nil)
		require.ErrorIs(t, err, tc.err, "%s/%s", tc.ini, tc.resp)
		require.Equal(t, tc.crc, ires.CRC, "%s/%s initiator", tc.ini, tc.resp)
		require.Equal(t, tc.crc, rres.CRC, "%s/%s responder", tc.ini, tc.resp)
	}
	// A Reply without C (siw with mpa_crc_required off answering a request
	// without C, or any responder that clears it) fails a Required initiator.
	req, err := BuildRequest(&Config{CRC: CRCRequired}, nil)
	require.NoError(t, err)
	rep := Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true}
	_, err = CheckReply(&Config{CRC: CRCRequired}, &req, &rep)
	require.ErrorIs(t, err, ErrCRCRequired)
	require.Equal(t, termcode.MPAInvalidFrame, code(t, err))
	res, err := CheckReply(&Config{CRC: CRCPreferred}, &req, &rep)
	require.NoError(t, err)
	require.True(t, res.CRC, "the Request's C alone turns CRC on (RFC 5044 §7.1.1)")
}

// RFC 5044 §7.1.1, C: "When this field is '0' in the MPA Request Frame and
// the MPA Reply Frame, CRCs MUST not be checked ... When this bit is '1' in
// either the MPA Request Frame or MPA Reply Frame, CRCs MUST be generated
// and checked by both endpoints."
func TestCheckReply_RFC5044_7_1_1_CRCEitherSide(t *testing.T) {
	for _, reqC := range []bool{false, true} {
		for _, repC := range []bool{false, true} {
			req := Frame{Kind: KindRequest, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true}
			rep := Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true}
			if reqC {
				req.Flags |= FlagCRC
			}
			if repC {
				rep.Flags |= FlagCRC
			}
			for _, mode := range []CRCMode{CRCPreferred, CRCOff} {
				res, err := CheckReply(&Config{CRC: mode}, &req, &rep)
				require.NoError(t, err)
				require.Equal(t, reqC || repC, res.CRC, "Request C %v, Reply C %v, mode %s", reqC, repC, mode)
			}
		}
	}

	// The responder: C in its Reply whenever the Request has C or its own
	// mode wants CRC; its Result agrees with what the Request and Reply
	// say together.
	for _, mode := range []CRCMode{CRCPreferred, CRCRequired, CRCOff} {
		for _, reqC := range []bool{false, true} {
			req := Frame{Kind: KindRequest, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true}
			if reqC {
				req.Flags |= FlagCRC
			}
			rep, res, err := AnswerRequest(&Config{CRC: mode}, &req, nil)
			require.NoError(t, err)
			repC := rep.Flags&FlagCRC != 0
			require.Equal(t, reqC || mode != CRCOff, repC, "mode %s, Request C %v", mode, reqC)
			require.Equal(t, reqC || repC, res.CRC)
			// siw as initiator runs with the Reply's C alone
			// (siw_proc_mpareply); echoing C keeps it in step.
			require.Equal(t, repC, res.CRC, "a siw initiator would disagree")
		}
	}

	// siw as responder copies the Request's C into its Reply
	// (siw_proc_mpareq), so against siw the Reply's C and the either-side
	// rule always agree: the rule changes nothing on the wire toward siw.
	for _, mode := range []CRCMode{CRCPreferred, CRCOff} {
		req, err := BuildRequest(&Config{CRC: mode}, nil)
		require.NoError(t, err)
		siwRep := Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced | req.Flags&FlagCRC, HasIRDORD: true}
		res, err := CheckReply(&Config{CRC: mode}, &req, &siwRep)
		require.NoError(t, err)
		require.Equal(t, siwRep.Flags&FlagCRC != 0, res.CRC)
		require.Equal(t, mode != CRCOff, res.CRC)
	}
}

func TestNegotiate_RFC6581_Revisions(t *testing.T) {
	t.Run("rev1", func(t *testing.T) {
		ires, rres, err := negotiate(t, &Config{Revision: 1, IRD: 4, ORD: 4}, &Config{IRD: 8, ORD: 8}, []byte("hi"), nil)
		require.NoError(t, err)
		for _, r := range []Result{ires, rres} {
			require.Equal(t, uint8(1), r.Revision)
			require.False(t, r.IRDORDKnown)
			require.Zero(t, r.IRD)
			require.Zero(t, r.ORD)
		}
		require.False(t, ires.Reply.HasIRDORD)
		require.Equal(t, "hi", string(rres.PeerPrivateData))
	})
	t.Run("rev2 without enhanced", func(t *testing.T) {
		ires, rres, err := negotiate(t, &Config{NoEnhanced: true, IRD: 4}, &Config{IRD: 8}, nil, nil)
		require.NoError(t, err)
		require.Equal(t, uint8(2), rres.Revision)
		require.False(t, rres.IRDORDKnown)
		require.False(t, ires.IRDORDKnown)
		require.Equal(t, Flags(0), ires.Reply.Flags&FlagEnhanced)
	})
	t.Run("responder echoes the request revision", func(t *testing.T) {
		for _, rev := range []uint8{1, 2} {
			req := Frame{Kind: KindRequest, Rev: rev}
			rep, _, err := AnswerRequest(&Config{Revision: 2}, &req, nil)
			require.NoError(t, err)
			require.Equal(t, rev, rep.Rev)
		}
	})
	t.Run("rev 0 and rev 3 get no reply", func(t *testing.T) {
		for _, rev := range []uint8{0, 3} {
			req := Frame{Kind: KindRequest, Rev: rev}
			rep, _, err := AnswerRequest(&Config{}, &req, nil)
			require.ErrorIs(t, err, ErrRevision)
			require.Zero(t, rep.Kind, "no reply is sent")
			var pe *Error
			require.ErrorAs(t, err, &pe)
			require.False(t, pe.RejectReply)
		}
	})
	t.Run("downgrade refused by default", func(t *testing.T) {
		req, err := BuildRequest(&Config{}, nil)
		require.NoError(t, err)
		for _, rep := range []Frame{
			{Kind: KindReply, Rev: 1}, // what the guest-client capture's host sent in round 4
			{Kind: KindReply, Rev: 2}, // rev 2 without E
			{Kind: KindReply, Rev: 1, Flags: FlagCRC},
		} {
			_, err := CheckReply(&Config{}, &req, &rep)
			require.ErrorIs(t, err, ErrRevisionMismatch)
			res, err := CheckReply(&Config{AcceptDowngrade: true}, &req, &rep)
			require.NoError(t, err)
			require.False(t, res.IRDORDKnown)
			require.Equal(t, rep.Rev, res.Revision)
		}
	})
	t.Run("reply newer than request", func(t *testing.T) {
		req := Frame{Kind: KindRequest, Rev: 1}
		rep := Frame{Kind: KindReply, Rev: 2}
		_, err := CheckReply(&Config{Revision: 1}, &req, &rep)
		require.ErrorIs(t, err, ErrRevision)
	})
	t.Run("enhanced reply to a plain request", func(t *testing.T) {
		req := Frame{Kind: KindRequest, Rev: 2}
		rep := Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true}
		_, err := CheckReply(&Config{NoEnhanced: true}, &req, &rep)
		require.ErrorIs(t, err, ErrRevisionMismatch)
	})
	t.Run("request key where a reply is due", func(t *testing.T) {
		req := Frame{Kind: KindRequest, Rev: 1}
		_, err := CheckReply(&Config{Revision: 1}, &req, &req)
		require.ErrorIs(t, err, ErrBadKey)
		require.Equal(t, termcode.Code(0x2004), err.(*Error).Code, "siw sends LLP/MPA/0x04 for a wrong reply key")
	})
}

// M declares the markers the frame's sender requires in the stream it
// receives (RFC 5044 §7.1.1); the sender MUST then add them (§4.3).
func TestNegotiate_RFC5044_7_1_1_MarkersPerDirection(t *testing.T) {
	ires, rres, err := negotiate(t, &Config{RequestMarkers: true}, &Config{}, nil, nil)
	require.NoError(t, err)
	require.True(t, ires.RecvMarkers)
	require.False(t, ires.SendMarkers)
	require.True(t, rres.SendMarkers)
	require.False(t, rres.RecvMarkers)

	ires, rres, err = negotiate(t, &Config{}, &Config{RequestMarkers: true}, nil, nil)
	require.NoError(t, err)
	require.True(t, ires.SendMarkers)
	require.True(t, rres.RecvMarkers)
	require.Equal(t, FlagMarkers, ires.Reply.Flags&FlagMarkers)

	// A responder that refuses markers rejects, as siw does (R set, M clear).
	_, rres, err = negotiate(t, &Config{RequestMarkers: true}, &Config{RefuseMarkers: true}, nil, nil)
	require.ErrorIs(t, err, ErrMarkersRefused)
	var pe *Error
	require.ErrorAs(t, err, &pe)
	require.True(t, pe.RejectReply)
	req, _ := BuildRequest(&Config{RequestMarkers: true}, nil)
	rep, _, _ := AnswerRequest(&Config{RefuseMarkers: true}, &req, nil)
	require.Equal(t, FlagReject|FlagEnhanced, rep.Flags)

	// An initiator that refuses markers fails on a Reply with M (siw does).
	_, _, err = negotiate(t, &Config{RefuseMarkers: true}, &Config{RequestMarkers: true}, nil, nil)
	require.ErrorIs(t, err, ErrMarkersRefused)
	require.Equal(t, termcode.MPAInvalidFrame, code(t, err))
}

func TestNegotiate_RFC6581_IRDORD(t *testing.T) {
	ires, rres, err := negotiate(t, &Config{IRD: 4, ORD: 2}, &Config{IRD: 8, ORD: 16}, nil, nil)
	require.NoError(t, err)
	// Responder: IRD = its capacity, ORD = min(own ORD, request IRD).
	require.Equal(t, IRDORD{IRD: 8, ORD: 4}, rres.Reply.IRDORD)
	require.Equal(t, uint16(8), rres.IRD)
	require.Equal(t, uint16(4), rres.ORD)
	require.Equal(t, uint16(4), rres.PeerIRD)
	require.Equal(t, uint16(2), rres.PeerORD)
	// Initiator: may issue min(own ORD, reply IRD) reads.
	require.True(t, ires.IRDORDKnown)
	require.Equal(t, uint16(2), ires.ORD)
	require.Equal(t, uint16(4), ires.IRD)

	// Reply ORD over the initiator's IRD: MPA error 0x06 for a Terminate.
	req, err := BuildRequest(&Config{IRD: 2, ORD: 2}, nil)
	require.NoError(t, err)
	rep := Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, IRDORD: IRDORD{IRD: 8, ORD: 4}}
	_, err = CheckReply(&Config{IRD: 2, ORD: 2}, &req, &rep)
	require.ErrorIs(t, err, ErrInsufficientIRD)
	require.Equal(t, termcode.Code(0x2006), err.(*Error).Code)

	// siw's answer to a 500/500 request (mpa-host-client round 5) is 128/128.
	req = Frame{Kind: KindRequest, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, IRDORD: IRDORD{IRD: 128, ORD: 128}}
	rep = Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, IRDORD: IRDORD{IRD: 128, ORD: 128}}
	res, err := CheckReply(&Config{IRD: 128, ORD: 128}, &req, &rep)
	require.NoError(t, err)
	require.Equal(t, uint16(128), res.ORD)
}

// RFC 6581 §9.1: "An all ones value (0x3FFF) indicates that automatic
// negotiation of the IRD or ORD is not desired, and that the ULP will be
// responsible for it."
func TestNegotiate_RFC6581_9_1_NoAutoIRDORD(t *testing.T) {
	const x = NoAutoIRDORD
	require.Equal(t, uint16(0x3fff), uint16(x))
	enhanced := func(kind Kind, ird, ord uint16, p2p bool, rtr RTR) Frame {
		return Frame{Kind: kind, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, IRDORD: IRDORD{IRD: ird, ORD: ord, P2P: p2p, RTR: rtr}}
	}

	// Responder: "MUST respond to an initiator ORD value of 0x3FFF by
	// leaving its local endpoint IRD value unchanged and setting the IRD
	// to 0x3FFF in its reply message", and to an initiator IRD of 0x3FFF
	// "by leaving its local endpoint ORD value unchanged, and setting ORD
	// to 0x3FFF".
	resp := &Config{IRD: 8, ORD: 16}
	for _, tc := range []struct {
		reqIRD, reqORD uint16
		rep            IRDORD
		ird, ord       uint16 // the responder's own values
	}{
		{x, x, IRDORD{IRD: x, ORD: x}, 8, 16},
		{4, x, IRDORD{IRD: x, ORD: 4}, 8, 4},
		{x, 2, IRDORD{IRD: 8, ORD: x}, 8, 16},
		{4, 2, IRDORD{IRD: 8, ORD: 4}, 8, 4}, // negotiated as usual
	} {
		req := enhanced(KindRequest, tc.reqIRD, tc.reqORD, false, 0)
		rep, res, err := AnswerRequest(resp, &req, nil)
		require.NoError(t, err)
		require.Equal(t, tc.rep, rep.IRDORD, "request IRD %#x ORD %#x", tc.reqIRD, tc.reqORD)
		require.Equal(t, tc.ird, res.IRD)
		require.Equal(t, tc.ord, res.ORD)
		require.Equal(t, tc.reqIRD, res.PeerIRD, "the peer's values reach the ULP")
		require.Equal(t, tc.reqORD, res.PeerORD)
	}
	req := enhanced(KindRequest, x, x, false, 0)
	rep, _, err := AnswerRequest(resp, &req, nil)
	require.NoError(t, err)
	b, err := AppendFrame(nil, &rep)
	require.NoError(t, err)
	require.Equal(t, testutil.Unhex(t, repKeyHex+"50 02 00 04 3f ff 3f ff"), b)
	// An initiator ORD of 0x3FFF still permits a Read RTR.
	req = enhanced(KindRequest, 4, x, true, RTRRead)
	_, res, err := AnswerRequest(&Config{IRD: 1}, &req, nil)
	require.NoError(t, err)
	require.Equal(t, RTRRead, res.RTR)

	// Initiator: "MUST leave its local endpoint ORD value unchanged upon
	// receiving a responder IRD value of 0x3FFF" and its IRD "upon
	// receiving a responder ORD value of 0x3FFF" (no error 0x06 then).
	ini := &Config{IRD: 2, ORD: 4}
	sent, err := BuildRequest(ini, nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		repIRD, repORD uint16
		ird, ord       uint16
	}{
		{8, x, 2, 4},
		{x, 1, 2, 4},
		{x, x, 2, 4},
		{1, 2, 2, 1}, // negotiated as usual
	} {
		rep := enhanced(KindReply, tc.repIRD, tc.repORD, false, 0)
		res, err := CheckReply(ini, &sent, &rep)
		require.NoError(t, err, "reply IRD %#x ORD %#x", tc.repIRD, tc.repORD)
		require.Equal(t, tc.ird, res.IRD)
		require.Equal(t, tc.ord, res.ORD)
		require.Equal(t, tc.repIRD, res.PeerIRD)
		require.Equal(t, tc.repORD, res.PeerORD)
	}
	// Any other value over this side's IRD is still error 0x06.
	rep = enhanced(KindReply, 8, x-1, false, 0)
	_, err = CheckReply(ini, &sent, &rep)
	require.ErrorIs(t, err, ErrInsufficientIRD)
	require.Equal(t, termcode.MPAInsufficientIRD, code(t, err))

	// This package never asks for it itself (decision E3).
	for _, c := range []Config{{IRD: x}, {ORD: x}} {
		require.ErrorIs(t, c.Validate(), ErrConfig)
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, bad := range []Config{
		{Revision: 3},
		{IRD: 3},
		{ORD: 256},
		{IRD: 129},
		{CRC: CRCOff + 1},
		{RequestMarkers: true, RefuseMarkers: true},
		{RTR: 0x08},
		{P2P: true, Revision: 1},
		{P2P: true, NoEnhanced: true},
		{MaxPrivateData: 513},
		{MaxPrivateData: -1},
	} {
		require.ErrorIs(t, bad.Validate(), ErrConfig, "%+v", bad)
		_, err := BuildRequest(&bad, nil)
		require.ErrorIs(t, err, ErrConfig)
	}
	for _, good := range []Config{{}, {IRD: 128, ORD: 1}, {IRD: 64, ORD: 32, P2P: true, RTR: RTRRead}, {Revision: 1}} {
		require.NoError(t, good.Validate(), "%+v", good)
	}
}

func TestNegotiate_RFC6581_PeerToPeerRTR(t *testing.T) {
	for _, tc := range []struct {
		name          string
		offer, accept RTR
		respIRD       uint16
		iniORD        uint16
		sendable      RTR // initiator's SendableRTR
		named         RTR // the responder's Reply
		want          RTR // the initiator's pick; 0: it fails with 0x07
	}{
		{"default offer is Write", 0, 0, 0, 0, 0, RTRWrite, RTRWrite},
		{"Write preferred", RTRSend | RTRWrite | RTRRead, RTRSend | RTRWrite | RTRRead, 1, 1, 0, RTRWrite, RTRWrite},
		{"Read when Write not offered", RTRRead | RTRSend, 0, 1, 1, 0, RTRRead, RTRRead},
		{"Read needs responder IRD", RTRRead | RTRSend, RTRRead | RTRSend, 0, 1, 0, RTRSend, RTRSend},
		{"Send only on request", RTRSend, RTRSend, 0, 0, 0, RTRSend, RTRSend},
		// No offered type usable: the responder names one it accepts
		// (siw names Write), and the initiator sends it if it can.
		{"Read needs initiator ORD", RTRRead, 0, 1, 0, 0, RTRWrite, RTRWrite},
		{"Read needs initiator ORD, Write not sendable", RTRRead, 0, 1, 0, RTRRead, RTRWrite, 0},
		{"Send not supported by default", RTRSend, 0, 4, 4, 0, RTRWrite, RTRWrite},
		{"disjoint", RTRWrite, RTRRead, 4, 4, 0, RTRRead, RTRRead},
		{"disjoint, Read not sendable", RTRWrite, RTRRead, 4, 4, RTRWrite | RTRSend, RTRRead, 0},
		{"disjoint, initiator ORD 0", RTRWrite, RTRRead, 4, 0, 0, RTRRead, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ini := &Config{P2P: true, RTR: tc.offer, SendableRTR: tc.sendable, IRD: 4, ORD: tc.iniORD}
			resp := &Config{P2P: true, RTR: tc.accept, IRD: tc.respIRD, ORD: 4}
			ires, rres, err := negotiate(t, ini, resp, nil, nil)
			// The responder always answers in peer-to-peer mode, with one
			// type, and waits for the RTR.
			require.True(t, rres.P2P)
			require.Equal(t, tc.named, rres.RTR)
			require.Equal(t, tc.named, rres.Reply.IRDORD.RTR)
			require.False(t, rres.SendRTR)
			require.True(t, rres.WaitForPeerFPDU, "responder waits for the RTR")
			if tc.want == 0 {
				require.ErrorIs(t, err, ErrNoMatchingRTR)
				require.Equal(t, termcode.MPANoMatchingRTR, code(t, err))
				require.False(t, err.(*Error).RejectReply, "the initiator terminates; nothing was rejected")
				return
			}
			require.NoError(t, err)
			require.True(t, ires.P2P)
			require.Equal(t, tc.want, ires.RTR)
			require.Equal(t, tc.want, rres.RTR)
			require.True(t, ires.SendRTR, "initiator sends the RTR first")
		})
	}
	t.Run("responder answers peer-to-peer whatever its P2P setting", func(t *testing.T) {
		// RFC 6581 §9.2: "If Control Flag A is 1 in the MPA Request
		// message, then the responder MUST set Control Flag A to 1".
		ires, rres, err := negotiate(t, &Config{P2P: true}, &Config{}, nil, nil)
		require.NoError(t, err)
		require.True(t, ires.P2P)
		require.True(t, rres.P2P)
		require.True(t, ires.SendRTR)
		require.Equal(t, RTRWrite, ires.RTR)
		ires, rres, err = negotiate(t, &Config{P2P: true, RTR: RTRSend}, &Config{RTR: RTRSend}, nil, nil)
		require.NoError(t, err)
		require.Equal(t, RTRSend, rres.RTR, "RTR says what a responder accepts, P2P or not")
		require.Equal(t, RTRSend, ires.RTR)
		// A client-server Request gets a client-server Reply, B–D clear.
		_, rres, err = negotiate(t, &Config{}, &Config{P2P: true, RTR: rtrAll}, nil, nil)
		require.NoError(t, err)
		require.False(t, rres.P2P)
		require.Equal(t, IRDORD{}, rres.Reply.IRDORD)
	})
	t.Run("initiator checks the reply's choice", func(t *testing.T) {
		req, err := BuildRequest(&Config{P2P: true, RTR: RTRWrite}, nil)
		require.NoError(t, err)
		p2pReply := func(rtr RTR, ird uint16) Frame {
			return Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, IRDORD: IRDORD{P2P: true, RTR: rtr, IRD: ird}}
		}
		// Read with ORD 0, or no type at all: nothing it can send.
		for _, rtr := range []RTR{RTRRead, 0} {
			rep := p2pReply(rtr, 0)
			_, err := CheckReply(&Config{P2P: true, RTR: RTRWrite}, &req, &rep)
			require.ErrorIs(t, err, ErrNoMatchingRTR, "reply RTR %s", rtr)
			require.Equal(t, termcode.Code(0x2007), err.(*Error).Code)
		}
		// Several types, or a type not offered: RFC 6581 §9.2 lets the
		// responder name any type it supports, and the initiator "MUST
		// generate one of the negotiated RTR indications".
		for _, tc := range []struct {
			rtr  RTR
			ird  uint16
			cfg  Config
			want RTR
		}{
			{RTRWrite | RTRRead, 0, Config{P2P: true, RTR: RTRWrite}, RTRWrite},
			{RTRSend, 0, Config{P2P: true, RTR: RTRWrite}, RTRSend},
			{RTRRead, 1, Config{P2P: true, RTR: RTRWrite, ORD: 1}, RTRRead},
			{rtrAll, 4, Config{P2P: true, RTR: RTRRead | RTRSend, ORD: 1}, RTRRead}, // an offered type first
			{RTRWrite | RTRSend, 4, Config{P2P: true, RTR: RTRRead, ORD: 1}, RTRWrite},
		} {
			req, err := BuildRequest(&tc.cfg, nil)
			require.NoError(t, err)
			rep := p2pReply(tc.rtr, tc.ird)
			res, err := CheckReply(&tc.cfg, &req, &rep)
			require.NoError(t, err, "reply RTR %s", tc.rtr)
			require.True(t, res.SendRTR)
			require.Equal(t, tc.want, res.RTR, "reply RTR %s", tc.rtr)
		}
		// SendableRTR bounds what it may be steered to.
		only := Config{P2P: true, RTR: RTRWrite, SendableRTR: RTRWrite}
		rep := p2pReply(RTRSend, 0)
		_, err = CheckReply(&only, &req, &rep)
		require.ErrorIs(t, err, ErrNoMatchingRTR)
		require.ErrorIs(t, (&Config{P2P: true, RTR: RTRRead, SendableRTR: RTRWrite}).Validate(), ErrConfig,
			"offering a type it cannot send")

		// P2P in a reply to a request that did not ask for it.
		plain, err := BuildRequest(&Config{}, nil)
		require.NoError(t, err)
		rep = Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, IRDORD: IRDORD{P2P: true, RTR: RTRWrite}}
		_, err = CheckReply(&Config{}, &plain, &rep)
		require.ErrorIs(t, err, ErrNoMatchingRTR)
	})
	t.Run("reply without A to a peer-to-peer request", func(t *testing.T) {
		// A responder MUST set A here (§9.2); the text gives the initiator
		// no rule for one that does not, and it runs client-server, as
		// before this package's responder followed the rule.
		req, err := BuildRequest(&Config{P2P: true}, nil)
		require.NoError(t, err)
		rep := Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, IRDORD: IRDORD{RTR: RTRWrite}}
		ires, err := CheckReply(&Config{P2P: true}, &req, &rep)
		require.NoError(t, err)
		require.False(t, ires.P2P)
		require.False(t, ires.SendRTR)
		require.Zero(t, ires.RTR, "B-D are ignored when A is 0")
	})
}

// The Reply siw produced for the P2P request of mpa-host-client round 6
// passes the initiator's checks and settles on Write.
func TestNegotiate_SiwP2PReplyFromCapture(t *testing.T) {
	req, _, err := ParseFrame(testutil.Unhex(t, reqKeyHex+"50 02 00 04 c0 10 c0 10"))
	require.NoError(t, err)
	rep, _, err := ParseFrame(testutil.Unhex(t, repKeyHex+"50 02 00 04 80 10 80 10"))
	require.NoError(t, err)
	res, err := CheckReply(&Config{P2P: true, RTR: RTRSend | RTRWrite | RTRRead, IRD: 16, ORD: 16}, &req, &rep)
	require.NoError(t, err)
	require.Equal(t, RTRWrite, res.RTR)
	require.True(t, res.CRC)

	// And this package, as responder, answers the same request the same way.
	ours, _, err := AnswerRequest(&Config{P2P: true, IRD: 16, ORD: 16}, &req, nil)
	require.NoError(t, err)
	b, err := AppendFrame(nil, &ours)
	require.NoError(t, err)
	require.Equal(t, testutil.Unhex(t, repKeyHex+"50 02 00 04 80 10 80 10"), b)
}

func TestNegotiate_RejectsCarryPrivateData(t *testing.T) {
	req, err := BuildRequest(&Config{IRD: 1, ORD: 1}, nil)
	require.NoError(t, err)
	rej, err := RejectReply(&Config{}, &req, []byte("host-reject"))
	require.NoError(t, err)
	b, err := AppendFrame(nil, &rej)
	require.NoError(t, err)
	// Enhanced request: R|E, revision echoed, a zero block so PD_Length >= 4.
	require.Equal(t, testutil.Unhex(t, repKeyHex+"30 02 00 0f 00 00 00 00 68 6f 73 74 2d 72 65 6a 65 63 74"), b)

	rep := wire(t, rej)
	_, err = CheckReply(&Config{}, &req, &rep)
	require.ErrorIs(t, err, ErrRejected)
	var re *RejectedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "host-reject", string(re.PrivateData))
	var pe *Error
	require.False(t, errors.As(err, &pe), "a reject implies no Terminate")

	// The reject the guest-client capture's host sent to siw.
	cap, _, err := ParseFrame(testutil.Unhex(t, repKeyHex+"30 02 00 0f 00 01 00 01 68 6f 73 74 2d 72 65 6a 65 63 74"))
	require.NoError(t, err)
	_, err = CheckReply(&Config{}, &req, &cap)
	require.ErrorAs(t, err, &re)
	require.Equal(t, "host-reject", string(re.PrivateData))

	// A rev-1 request gets a rev-1 reject without a block.
	rej, err = RejectReply(&Config{}, &Frame{Kind: KindRequest, Rev: 1}, []byte("no"))
	require.NoError(t, err)
	require.False(t, rej.HasIRDORD)
	require.Equal(t, uint8(1), rej.Rev)
}

// An enhanced Request too short for its block is improperly formatted
// (RFC 6581 §6: with S set the Private Data "MUST begin with" the block),
// and an improperly formatted Request is closed without a Reply (RFC 5044
// §7.1.2 rule 2: "the implementation MUST close the TCP connection and exit
// MPA"). siw answers it with a reject instead (mpa-host-client round 9).
func TestAnswerRequest_RFC5044_7_1_2_ShortEnhancedRequestClosed(t *testing.T) {
	for _, flags := range []Flags{FlagEnhanced, FlagEnhanced | FlagCRC, FlagEnhanced | FlagReject} {
		// R is "not checked on reception in the MPA Request Frame"
		// (RFC 5044 §7.1.1): the frame parses, PD_Length 2, no block.
		b := testutil.Unhex(t, reqKeyHex+fmt.Sprintf("%02x 02 00 02 00 01", uint8(flags)))
		req, _, perr := ParseFrame(b)
		if flags&FlagReject == 0 {
			require.ErrorIs(t, perr, ErrShortEnhanced)
			req = Frame{Kind: KindRequest, Rev: 2, Flags: flags, PrivateData: []byte{0, 1}}
		} else {
			require.NoError(t, perr)
			require.False(t, req.HasIRDORD)
		}
		for _, cfg := range []Config{{}, {P2P: true, IRD: 4, ORD: 4}} {
			rep, _, err := AnswerRequest(&cfg, &req, nil)
			require.ErrorIs(t, err, ErrShortEnhanced)
			require.False(t, err.(*Error).RejectReply)
			require.Equal(t, termcode.MPAInvalidFrame, code(t, err))
			require.Zero(t, rep.Kind, "no Reply is sent")
		}
	}
}

func TestNegotiate_SiwPrivateDataLimits(t *testing.T) {
	pd := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	_, err := BuildRequest(&Config{}, pd(SiwMaxPrivateData))
	require.NoError(t, err)
	_, err = BuildRequest(&Config{}, pd(SiwMaxPrivateData+1))
	require.ErrorIs(t, err, ErrSiwLimit)
	require.Contains(t, err.Error(), "siw")
	_, err = BuildRequest(&Config{Revision: 1}, pd(252))
	require.ErrorIs(t, err, ErrSiwLimit, "251 also applies without the block")

	// Known iwarp-go peer: RFC 5044's 512 including the block.
	_, err = BuildRequest(&Config{PeerIsIwarpGo: true}, pd(508))
	require.NoError(t, err)
	_, err = BuildRequest(&Config{PeerIsIwarpGo: true}, pd(509))
	require.ErrorIs(t, err, ErrPrivateDataLength)
	_, err = BuildRequest(&Config{PeerIsIwarpGo: true, Revision: 1}, pd(512))
	require.NoError(t, err)

	// The responder's Accept and Reject are bounded the same way.
	req, _ := BuildRequest(&Config{}, nil)
	_, _, err = AnswerRequest(&Config{}, &req, pd(252))
	require.ErrorIs(t, err, ErrSiwLimit)
	_, err = RejectReply(&Config{}, &req, pd(252))
	require.ErrorIs(t, err, ErrSiwLimit)
	_, _, err = AnswerRequest(&Config{PeerIsIwarpGo: true}, &req, pd(300))
	require.NoError(t, err)
}

func TestNegotiate_ResponderOrderingDuties(t *testing.T) {
	ires, rres, err := negotiate(t, &Config{}, &Config{}, nil, nil)
	require.NoError(t, err)
	require.True(t, rres.WaitForPeerFPDU)
	require.False(t, ires.WaitForPeerFPDU)
	require.Equal(t, Responder, rres.Role)
	require.Equal(t, Initiator, ires.Role)
}

// permissive accepts every Reply a correct responder can send to req.
func permissive(req *Frame) *Config {
	c := &Config{AcceptDowngrade: true, IRD: 128, ORD: 128, Revision: req.Rev}
	if c.Revision == 0 || c.Revision > 2 {
		c.Revision = 2
	}
	if req.HasIRDORD && req.IRDORD.P2P {
		c.P2P, c.RTR = true, req.IRDORD.RTR
	}
	if !req.Enhanced() && c.Revision == 2 {
		c.NoEnhanced = true
	}
	return c
}

func FuzzNegotiate(f *testing.F) {
	for _, g := range goldenFrames {
		f.Add(testutil.Unhex(f, g.hex), uint8(0))
	}
	// An enhanced Request too short for its block; with R set it parses.
	f.Add(testutil.Unhex(f, reqKeyHex+"30 02 00 02 00 01"), uint8(1))
	// 0x3FFF in either field (RFC 6581 §9.1), with and without P2P, and
	// peer-to-peer offers no responder accepts.
	for _, blk := range []string{"3f ff 3f ff", "00 04 3f ff", "3f ff 00 02", "bf ff 7f ff", "c0 04 00 00", "80 04 40 00", "80 00 80 00", "80 04 00 04"} {
		f.Add(testutil.Unhex(f, reqKeyHex+"50 02 00 04 "+blk), uint8(4))
		f.Add(testutil.Unhex(f, repKeyHex+"50 02 00 04 "+blk), uint8(5))
	}
	for _, c := range []Config{{}, {P2P: true, RTR: rtrAll, IRD: 4, ORD: 4}, {Revision: 1, RequestMarkers: true}, {NoEnhanced: true, CRC: CRCOff}} {
		req, err := BuildRequest(&c, []byte("pd"))
		require.NoError(f, err)
		b, err := AppendFrame(nil, &req)
		require.NoError(f, err)
		f.Add(b, uint8(3))
	}
	responders := []Config{
		{},
		{IRD: 16, ORD: 16, P2P: true},
		{RefuseMarkers: true, CRC: CRCOff, IRD: 1, ORD: 1},
		{RequestMarkers: true, P2P: true, RTR: RTRSend, CRC: CRCRequired},
		{IRD: 0, ORD: 4, RTR: RTRRead},               // can never take a Read RTR
		{IRD: 2, ORD: 2, RTR: RTRRead | RTRSend},     // no Write
		{Revision: 1, NoEnhanced: true, CRC: CRCOff}, // answers what it is asked
	}
	f.Fuzz(func(t *testing.T, b []byte, pick uint8) {
		frame, _, err := ParseFrame(b)
		if err != nil {
			return
		}
		// Responder role: any parsed frame as a Request.
		resp := &responders[int(pick)%len(responders)]
		rep, rres, err := AnswerRequest(resp, &frame, []byte("ok"))
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("responder error %v is not an *Error", err)
			}
			if errors.Is(err, ErrShortEnhanced) && rep.Kind != 0 {
				t.Fatalf("an improperly formatted Request %s is answered with %s", &frame, &rep)
			}
			if rep.Kind != 0 {
				if _, err := AppendFrame(nil, &rep); err != nil {
					t.Fatalf("reject frame does not encode: %v", err)
				}
			}
		} else {
			checkAnswer(t, resp, &frame, &rep, &rres)
			enc, err := AppendFrame(nil, &rep)
			if err != nil {
				t.Fatalf("reply does not encode: %v", err)
			}
			back, _, err := ParseFrame(enc)
			if err != nil {
				t.Fatalf("reply does not parse back: %v", err)
			}
			ires, err := CheckReply(permissive(&frame), &frame, &back)
			if err != nil && errors.Is(err, ErrNoMatchingRTR) && back.IRDORD.RTR == RTRRead && back.IRDORD.IRD == 0 {
				// The responder named the one type it accepts, a Read,
				// with no IRD to take it: the initiator rightly
				// terminates with 0x07 (RFC 6581 §9.2).
				return
			}
			if err != nil {
				t.Fatalf("a correct reply %s to %s was refused: %v", &back, &frame, err)
			}
			if ires.CRC != rres.CRC || ires.P2P != rres.P2P || ires.RTR != rres.RTR ||
				ires.SendMarkers != rres.RecvMarkers || ires.RecvMarkers != rres.SendMarkers {
				t.Fatalf("sides disagree: initiator %+v responder %+v", ires, rres)
			}
		}
		// Initiator role: the same frame as the Reply to a fixed request.
		for _, c := range []Config{{IRD: 4, ORD: 4}, {Revision: 1}, {P2P: true, RTR: RTRRead, IRD: 1, ORD: 1},
			{P2P: true, RTR: RTRWrite, SendableRTR: RTRWrite | RTRSend}} {
			req, err := BuildRequest(&c, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := CheckReply(&c, &req, &frame)
			if err != nil {
				var pe *Error
				var re *RejectedError
				if !errors.As(err, &pe) && !errors.As(err, &re) {
					t.Fatalf("initiator error %v is neither *Error nor *RejectedError", err)
				}
				continue
			}
			if res.ORD > c.ORD || (res.IRDORDKnown && res.PeerORD > c.IRD && res.PeerORD != NoAutoIRDORD) {
				t.Fatalf("initiator accepted ORD %d / peer ORD %d over config %+v", res.ORD, res.PeerORD, c)
			}
			if res.IRDORDKnown && res.IRD != c.IRD {
				t.Fatalf("initiator IRD %d, configured %d", res.IRD, c.IRD)
			}
			if res.IRDORDKnown && frame.IRDORD.IRD == NoAutoIRDORD && res.ORD != c.ORD {
				t.Fatalf("initiator ORD %d changed on a responder IRD of 0x3FFF (config %d)", res.ORD, c.ORD)
			}
			if res.P2P {
				if !c.P2P || !frame.IRDORD.P2P {
					t.Fatalf("peer-to-peer result %+v without both sides asking", res)
				}
				if bits := res.RTR; bits == 0 || bits&(bits-1) != 0 || bits&^frame.IRDORD.RTR != 0 || bits&^c.sendableRTR() != 0 {
					t.Fatalf("initiator picked RTR %s from %s (sendable %s)", res.RTR, frame.IRDORD.RTR, c.sendableRTR())
				}
				if res.RTR == RTRRead && res.ORD == 0 {
					t.Fatal("Read RTR with ORD 0")
				}
				if !res.SendRTR {
					t.Fatal("peer-to-peer initiator without an RTR to send")
				}
			}
		}
	})
}

// checkAnswer holds a responder's accepted Reply to RFC 6581 §9.1 and §9.2.
func checkAnswer(t *testing.T, cfg *Config, req, rep *Frame, res *Result) {
	t.Helper()
	if !req.Enhanced() {
		if rep.HasIRDORD || res.P2P {
			t.Fatalf("enhanced answer %s to %s", rep, req)
		}
		return
	}
	in, out := req.IRDORD, rep.IRDORD
	if out.P2P != in.P2P || res.P2P != in.P2P {
		t.Fatalf("A %v answered with %v (RFC 6581 §9.2)", in.P2P, out.P2P)
	}
	switch {
	case !in.P2P && out.RTR != 0:
		t.Fatalf("B-D set without A: %s", rep)
	case in.P2P && (out.RTR == 0 || out.RTR&(out.RTR-1) != 0 || out.RTR&^cfg.acceptedRTR() != 0 || res.RTR != out.RTR):
		t.Fatalf("RTR %s named, accepted %s", out.RTR, cfg.acceptedRTR())
	}
	if (in.ORD == NoAutoIRDORD) != (out.IRD == NoAutoIRDORD) || (in.IRD == NoAutoIRDORD) != (out.ORD == NoAutoIRDORD) {
		t.Fatalf("0x3FFF not answered in kind: %s to %s", rep, req)
	}
	if res.IRD != cfg.IRD {
		t.Fatalf("responder IRD %d, configured %d", res.IRD, cfg.IRD)
	}
	if in.IRD == NoAutoIRDORD && res.ORD != cfg.ORD || in.IRD != NoAutoIRDORD && (res.ORD > in.IRD || out.ORD != res.ORD) {
		t.Fatalf("responder ORD %d (reply %d), configured %d, initiator IRD %d", res.ORD, out.ORD, cfg.ORD, in.IRD)
	}
}
