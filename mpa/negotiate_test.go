package mpa

import (
	"bytes"
	"errors"
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
	// CRC in use is the Reply's C bit; Required initiators fail without it.
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
	require.False(t, res.CRC)
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

func TestNegotiate_RFC5044_5_MarkersPerDirection(t *testing.T) {
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
		want          RTR
		err           error
	}{
		{"default offer is Write", 0, 0, 0, 0, RTRWrite, nil},
		{"Write preferred", RTRSend | RTRWrite | RTRRead, RTRSend | RTRWrite | RTRRead, 1, 1, RTRWrite, nil},
		{"Read when Write not offered", RTRRead | RTRSend, 0, 1, 1, RTRRead, nil},
		{"Read needs responder IRD", RTRRead | RTRSend, RTRRead | RTRSend, 0, 1, RTRSend, nil},
		{"Read needs initiator ORD", RTRRead, 0, 1, 0, 0, ErrNoMatchingRTR},
		{"Send only on request", RTRSend, RTRSend, 0, 0, RTRSend, nil},
		{"Send not supported by default", RTRSend, 0, 4, 4, 0, ErrNoMatchingRTR},
		{"disjoint", RTRWrite, RTRRead, 4, 4, 0, ErrNoMatchingRTR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ini := &Config{P2P: true, RTR: tc.offer, IRD: 4, ORD: tc.iniORD}
			resp := &Config{P2P: true, RTR: tc.accept, IRD: tc.respIRD, ORD: 4}
			ires, rres, err := negotiate(t, ini, resp, nil, nil)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Equal(t, termcode.MPANoMatchingRTR, code(t, err))
				require.True(t, err.(*Error).RejectReply)
				return
			}
			require.NoError(t, err)
			require.True(t, ires.P2P)
			require.True(t, rres.P2P)
			require.Equal(t, tc.want, ires.RTR)
			require.Equal(t, tc.want, rres.RTR)
			require.True(t, ires.SendRTR, "initiator sends the RTR first")
			require.False(t, rres.SendRTR)
			require.True(t, rres.WaitForPeerFPDU, "responder waits for the RTR")
		})
	}
	t.Run("responder without P2P answers without it", func(t *testing.T) {
		ires, rres, err := negotiate(t, &Config{P2P: true}, &Config{}, nil, nil)
		require.NoError(t, err)
		require.False(t, ires.P2P)
		require.False(t, rres.P2P)
		require.False(t, ires.SendRTR)
	})
	t.Run("initiator checks the reply's choice", func(t *testing.T) {
		req, err := BuildRequest(&Config{P2P: true, RTR: RTRWrite}, nil)
		require.NoError(t, err)
		for _, rtr := range []RTR{RTRRead, RTRWrite | RTRRead, 0} {
			rep := Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, IRDORD: IRDORD{P2P: true, RTR: rtr}}
			_, err := CheckReply(&Config{P2P: true, RTR: RTRWrite}, &req, &rep)
			require.ErrorIs(t, err, ErrNoMatchingRTR, "reply RTR %s", rtr)
			require.Equal(t, termcode.Code(0x2007), err.(*Error).Code)
		}
		// P2P in a reply to a request that did not ask for it.
		plain, err := BuildRequest(&Config{}, nil)
		require.NoError(t, err)
		rep := Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, IRDORD: IRDORD{P2P: true, RTR: RTRWrite}}
		_, err = CheckReply(&Config{}, &plain, &rep)
		require.ErrorIs(t, err, ErrNoMatchingRTR)
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

// An enhanced request too short for its block is answered with a reject
// (siw_proc_mpareq does the same; mpa-host-client round 9).
func TestNegotiate_RFC6581_ShortEnhancedRequestRejected(t *testing.T) {
	req := Frame{Kind: KindRequest, Rev: 2, Flags: FlagEnhanced, PrivateData: []byte{0, 1}}
	rep, _, err := AnswerRequest(&Config{}, &req, nil)
	require.ErrorIs(t, err, ErrShortEnhanced)
	require.True(t, err.(*Error).RejectReply)
	require.Equal(t, FlagReject|FlagEnhanced, rep.Flags)
	require.True(t, rep.HasIRDORD, "our rejects keep PD_Length >= 4")
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
			if rep.Kind != 0 {
				if _, err := AppendFrame(nil, &rep); err != nil {
					t.Fatalf("reject frame does not encode: %v", err)
				}
			}
		} else {
			enc, err := AppendFrame(nil, &rep)
			if err != nil {
				t.Fatalf("reply does not encode: %v", err)
			}
			back, _, err := ParseFrame(enc)
			if err != nil {
				t.Fatalf("reply does not parse back: %v", err)
			}
			ires, err := CheckReply(permissive(&frame), &frame, &back)
			if err != nil {
				t.Fatalf("a correct reply %s to %s was refused: %v", &back, &frame, err)
			}
			if ires.CRC != rres.CRC || ires.P2P != rres.P2P || ires.RTR != rres.RTR ||
				ires.SendMarkers != rres.RecvMarkers || ires.RecvMarkers != rres.SendMarkers {
				t.Fatalf("sides disagree: initiator %+v responder %+v", ires, rres)
			}
		}
		// Initiator role: the same frame as the Reply to a fixed request.
		for _, c := range []Config{{IRD: 4, ORD: 4}, {Revision: 1}, {P2P: true, RTR: RTRRead, IRD: 1, ORD: 1}} {
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
			if res.ORD > c.ORD || (res.IRDORDKnown && res.PeerORD > c.IRD) {
				t.Fatalf("initiator accepted ORD %d / peer ORD %d over config %+v", res.ORD, res.PeerORD, c)
			}
		}
	})
}
