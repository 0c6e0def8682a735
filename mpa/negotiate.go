package mpa

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// Role is a side of MPA connection setup.
type Role uint8

const (
	// Initiator sends the Request (the TCP client in siw and rdma_cm).
	Initiator Role = iota + 1
	// Responder answers with the Reply.
	Responder
)

func (r Role) String() string {
	switch r {
	case Initiator:
		return "initiator"
	case Responder:
		return "responder"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Result is what connection setup settled, from one side's point of view.
type Result struct {
	Role     Role
	Revision uint8
	// CRC is the Reply's C bit: whether both directions carry CRC32c.
	CRC bool
	// SendMarkers: the peer set M, so this side inserts markers into the
	// stream it sends. RecvMarkers: this side set M, so the peer's stream
	// carries markers.
	SendMarkers, RecvMarkers bool

	// IRDORDKnown reports an RFC 6581 exchange. Without it (revision 1, or
	// revision 2 without the Enhanced flag) IRD and ORD are zero and the
	// upper layer applies its configured default.
	IRDORDKnown bool
	// IRD is the number of inbound RDMA Read Requests this side must be
	// able to hold (what it advertised); ORD is the number it may have
	// outstanding towards the peer.
	IRD, ORD uint16
	// PeerIRD and PeerORD are the values in the peer's block.
	PeerIRD, PeerORD uint16

	// P2P reports peer-to-peer mode; RTR is the one RTR type chosen.
	P2P bool
	RTR RTR
	// SendRTR: this side (the initiator in P2P mode) must send an RTR of
	// type RTR as its first FPDU, before anything else.
	SendRTR bool
	// WaitForPeerFPDU: this side (the responder) must not send an FPDU
	// until the initiator's first FPDU has arrived. A siw initiator treats
	// bytes that follow the Reply too closely as a protocol error
	// (siw_recv_mpa_rr). In P2P mode that first FPDU is the RTR, which
	// the initiator sends at once.
	WaitForPeerFPDU bool

	// PeerPrivateData is the peer's application private data.
	PeerPrivateData []byte
	// Request and Reply are the frames exchanged.
	Request, Reply Frame
}

// BuildRequest returns the Request an initiator configured by cfg sends
// with the given application private data.
func BuildRequest(cfg *Config, privateData []byte) (Frame, error) {
	if err := cfg.Validate(); err != nil {
		return Frame{}, err
	}
	enh := cfg.enhanced()
	if err := cfg.checkOutgoingPD(privateData, enh); err != nil {
		return Frame{}, err
	}
	f := Frame{Kind: KindRequest, Rev: cfg.revision(), PrivateData: privateData}
	if cfg.CRC != CRCOff {
		f.Flags |= FlagCRC
	}
	if cfg.RequestMarkers {
		f.Flags |= FlagMarkers
	}
	if enh {
		f.Flags |= FlagEnhanced
		f.HasIRDORD = true
		f.IRDORD = IRDORD{IRD: cfg.IRD, ORD: cfg.ORD}
		if cfg.P2P {
			f.IRDORD.P2P = true
			f.IRDORD.RTR = cfg.RTR
			if f.IRDORD.RTR == 0 {
				f.IRDORD.RTR = RTRWrite
			}
		}
	}
	return f, nil
}

// AnswerRequest is the responder's decision on a received Request. On
// success it returns the Reply to send (carrying privateData) and the
// Result.
//
// A protocol failure is an *Error. When the failure calls for a Reply with
// R set, reply is that reject frame (reply.Kind != 0) and the caller sends
// it before closing; otherwise reply is the zero Frame and the caller closes
// the connection without a reply. Configuration and private-data limit
// errors are returned as they are, with the zero Frame.
//
// Checks, in order:
//   - not a Request, or revision 0 or above 2: no reply (siw closes silently);
//   - enhanced with PD_Length < 4: reject (siw rejects);
//   - M set while cfg.RefuseMarkers: reject (siw rejects M);
//   - peer-to-peer requested with no RTR type both offered and supported:
//     reject, error code 0x07.
func AnswerRequest(cfg *Config, req *Frame, privateData []byte) (reply Frame, res Result, err error) {
	if err := cfg.Validate(); err != nil {
		return Frame{}, Result{}, err
	}
	if req.Kind != KindRequest {
		return Frame{}, Result{}, protoErr(termcode.MPAInvalidFrame, ErrBadKey, "expected a Request, got a %s", req.Kind)
	}
	if req.Rev == 0 || req.Rev > 2 {
		return Frame{}, Result{}, protoErr(termcode.MPAInvalidFrame, ErrRevision, "request revision %d", req.Rev)
	}
	reject := func(e *Error) (Frame, Result, error) {
		e.RejectReply = true
		return rejectFrame(req, nil), Result{}, e
	}
	if req.Enhanced() && !req.HasIRDORD {
		return reject(protoErr(termcode.MPAInvalidFrame, ErrShortEnhanced, "PD_Length %d", req.PDLength()))
	}
	if req.Flags&FlagMarkers != 0 && cfg.RefuseMarkers {
		return reject(protoErr(termcode.MPAInvalidFrame, ErrMarkersRefused, "request has M set"))
	}

	rep := Frame{Kind: KindReply, Rev: req.Rev}
	res = Result{
		Role:            Responder,
		Revision:        req.Rev,
		SendMarkers:     req.Flags&FlagMarkers != 0,
		RecvMarkers:     cfg.RequestMarkers,
		WaitForPeerFPDU: true,
		PeerPrivateData: req.PrivateData,
	}
	if cfg.CRC != CRCOff || req.Flags&FlagCRC != 0 {
		rep.Flags |= FlagCRC
		res.CRC = true
	}
	if cfg.RequestMarkers {
		rep.Flags |= FlagMarkers
	}
	if req.Enhanced() {
		in := req.IRDORD
		rep.Flags |= FlagEnhanced
		rep.HasIRDORD = true
		// RFC 6581: the responder's IRD is what it can take; its ORD may
		// not exceed the initiator's IRD.
		rep.IRDORD = IRDORD{IRD: cfg.IRD, ORD: min(cfg.ORD, in.IRD)}
		res.IRDORDKnown = true
		res.IRD, res.ORD = rep.IRDORD.IRD, rep.IRDORD.ORD
		res.PeerIRD, res.PeerORD = in.IRD, in.ORD
		if in.P2P && cfg.P2P {
			rtr := pickRTR(cfg, in)
			if rtr == 0 {
				return reject(protoErr(termcode.MPANoMatchingRTR, ErrNoMatchingRTR,
					"offered %s, supported %s", in.RTR, supportedRTR(cfg)))
			}
			rep.IRDORD.P2P, rep.IRDORD.RTR = true, rtr
			res.P2P, res.RTR = true, rtr
		}
	}
	if err := cfg.checkOutgoingPD(privateData, rep.HasIRDORD); err != nil {
		return Frame{}, Result{}, err
	}
	rep.PrivateData = privateData
	res.Request, res.Reply = *req, rep
	return rep, res, nil
}

func supportedRTR(cfg *Config) RTR {
	if cfg.RTR == 0 {
		return RTRWrite | RTRRead
	}
	return cfg.RTR
}

// pickRTR chooses among the types offered and supported, preferring Write,
// then Read, then Send. siw as responder makes the same Write-then-Read
// choice (siw_proc_mpareq). A Read RTR is only possible when this side
// accepts a read (IRD ≥ 1) and the initiator may issue one (its ORD ≥ 1).
func pickRTR(cfg *Config, in IRDORD) RTR {
	ok := in.RTR & supportedRTR(cfg)
	switch {
	case ok&RTRWrite != 0:
		return RTRWrite
	case ok&RTRRead != 0 && cfg.IRD >= 1 && in.ORD >= 1:
		return RTRRead
	case ok&RTRSend != 0:
		return RTRSend
	}
	return 0
}

// RejectReply returns the Reply with R set that rejects req, carrying the
// application's private data. It echoes the request's revision and, for an
// enhanced request, includes an all-zero IRD/ORD block so that PD_Length is
// never below 4: siw_proc_mpareply reads the block of an enhanced Reply
// without checking PD_Length.
func RejectReply(cfg *Config, req *Frame, privateData []byte) (Frame, error) {
	if err := cfg.Validate(); err != nil {
		return Frame{}, err
	}
	f := rejectFrame(req, privateData)
	if err := cfg.checkOutgoingPD(privateData, f.HasIRDORD); err != nil {
		return Frame{}, err
	}
	return f, nil
}

func rejectFrame(req *Frame, privateData []byte) Frame {
	f := Frame{Kind: KindReply, Rev: req.Rev, Flags: FlagReject, PrivateData: privateData}
	if f.Rev == 0 || f.Rev > 2 {
		f.Rev = 1
	}
	if req.Enhanced() {
		f.Flags |= FlagEnhanced
		f.HasIRDORD = true
	}
	return f
}

// CheckReply is the initiator's decision on the Reply rep to its Request
// req. A reject is a *RejectedError; protocol failures are *Error values
// whose code the initiator sends in a Terminate (siw does so for a wrong
// key, 0x06 and 0x07).
//
// Checks, in order: the key; R; the revision (an enhanced Request accepts
// only an enhanced Reply unless cfg.AcceptDowngrade); M against
// cfg.RefuseMarkers; C against CRCRequired; the IRD/ORD block (the
// responder's ORD must not exceed this side's IRD, code 0x06); the RTR
// choice (one type, among those offered, code 0x07).
func CheckReply(cfg *Config, req, rep *Frame) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if rep.Kind != KindReply {
		return Result{}, protoErr(termcode.MPAInvalidFrame, ErrBadKey, "expected a Reply, got a %s", rep.Kind)
	}
	if rep.Flags&FlagReject != 0 {
		return Result{}, &RejectedError{Reply: *rep, PrivateData: rep.PrivateData}
	}
	if rep.Rev == 0 || rep.Rev > req.Rev {
		return Result{}, protoErr(termcode.MPAInvalidFrame, ErrRevision, "reply revision %d to a revision %d request", rep.Rev, req.Rev)
	}
	switch {
	case req.Enhanced() && !rep.Enhanced() && !cfg.AcceptDowngrade:
		return Result{}, protoErr(termcode.MPAInvalidFrame, ErrRevisionMismatch,
			"enhanced request answered by revision %d flags %s", rep.Rev, rep.Flags)
	case !req.Enhanced() && rep.Enhanced():
		return Result{}, protoErr(termcode.MPAInvalidFrame, ErrRevisionMismatch, "enhanced reply to a request without enhanced setup")
	}
	if rep.Flags&FlagMarkers != 0 && cfg.RefuseMarkers {
		return Result{}, protoErr(termcode.MPAInvalidFrame, ErrMarkersRefused, "reply has M set")
	}
	if rep.Flags&FlagCRC == 0 && cfg.CRC == CRCRequired {
		return Result{}, protoErr(termcode.MPAInvalidFrame, ErrCRCRequired, "reply has C clear")
	}
	res := Result{
		Role:            Initiator,
		Revision:        rep.Rev,
		CRC:             rep.Flags&FlagCRC != 0,
		SendMarkers:     rep.Flags&FlagMarkers != 0,
		RecvMarkers:     req.Flags&FlagMarkers != 0,
		PeerPrivateData: rep.PrivateData,
		Request:         *req,
		Reply:           *rep,
	}
	if rep.HasIRDORD {
		in := rep.IRDORD
		if in.ORD > cfg.IRD {
			return Result{}, protoErr(termcode.MPAInsufficientIRD, ErrInsufficientIRD, "reply ORD %d, own IRD %d", in.ORD, cfg.IRD)
		}
		res.IRDORDKnown = true
		res.IRD, res.ORD = cfg.IRD, min(cfg.ORD, in.IRD)
		res.PeerIRD, res.PeerORD = in.IRD, in.ORD
		if in.P2P {
			offered := RTR(0)
			if req.HasIRDORD && req.IRDORD.P2P {
				offered = req.IRDORD.RTR
			}
			if in.RTR == 0 || in.RTR&(in.RTR-1) != 0 || in.RTR&^offered != 0 {
				return Result{}, protoErr(termcode.MPANoMatchingRTR, ErrNoMatchingRTR, "reply RTR %s, offered %s", in.RTR, offered)
			}
			res.P2P, res.RTR, res.SendRTR = true, in.RTR, true
		}
	}
	return res, nil
}
