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
	// CRC reports that both directions carry CRC32c: the Request or the
	// Reply has C set (RFC 5044 §7.1.1).
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
	// able to hold (what it advertised, unless it answered NoAutoIRDORD);
	// ORD is the number it may have outstanding towards the peer.
	IRD, ORD uint16
	// PeerIRD and PeerORD are the values in the peer's block (RFC 6581
	// §9.1: both sides "MUST pass the peer's provided IRD and ORD values
	// to the ULP"). NoAutoIRDORD there leaves that value to the upper
	// layer.
	PeerIRD, PeerORD uint16

	// P2P reports peer-to-peer mode; RTR is the one RTR type chosen: the
	// one the responder named, or, on the initiator, the one it picked
	// among those the Reply names.
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
			f.IRDORD.RTR = cfg.offeredRTR()
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
//   - enhanced with PD_Length < 4: no reply (siw rejects; RFC 5044 §7.1.2
//     rule 2 closes an improperly formatted Request);
//   - M set while cfg.RefuseMarkers: reject (siw rejects M).
//
// A peer-to-peer Request is always answered in peer-to-peer mode with one
// RTR type (RFC 6581 §9.2): one offered and accepted (cfg.RTR) if there is
// one, else one this side accepts, leaving it to the initiator to send it
// or to terminate with error 0x07, as siw does.
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
		// RFC 6581 §6: with S set, "Private Data MUST begin with enhanced
		// RDMA connection establishment data"; without room for it the
		// Request is improperly formatted, and RFC 5044 §7.1.2 rule 2
		// says the responder "MUST close the TCP connection and exit
		// MPA" (§8 code 4: "immediately closed"). siw rejects instead.
		return Frame{}, Result{}, protoErr(termcode.MPAInvalidFrame, ErrShortEnhanced, "PD_Length %d", req.PDLength())
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
	// C in the Reply is this side's preference; CRC is on when either
	// frame has C (RFC 5044 §7.1.1). C is echoed even in CRCOff, so an
	// initiator that follows the Reply's C alone (siw) still agrees.
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
		// RFC 6581 §9.1: the responder's IRD is what it can take; "The
		// responder MUST set its ORD at most to the initiator IRD".
		res.IRD, res.ORD = cfg.IRD, min(cfg.ORD, in.IRD)
		rep.IRDORD = IRDORD{IRD: res.IRD, ORD: res.ORD}
		// "The responder MUST respond to an initiator ORD value of 0x3FFF
		// by leaving its local endpoint IRD value unchanged and setting
		// the IRD to 0x3FFF in its reply message", and likewise for an
		// initiator IRD of 0x3FFF and its own ORD.
		if in.ORD == NoAutoIRDORD {
			rep.IRDORD.IRD = NoAutoIRDORD
		}
		if in.IRD == NoAutoIRDORD {
			res.ORD = cfg.ORD
			rep.IRDORD.ORD = NoAutoIRDORD
		}
		res.IRDORDKnown = true
		res.PeerIRD, res.PeerORD = in.IRD, in.ORD
		if in.P2P {
			// RFC 6581 §9.2: "If Control Flag A is 1 in the MPA Request
			// message, then the responder MUST set Control Flag A to 1",
			// and "If the responder does not support any of the
			// initiator-specified RTR indication options, then the
			// responder MUST set at least one RTR indication type option
			// it supports."
			rtr := pickRTR(cfg, in)
			if rtr == 0 {
				rtr = fallbackRTR(cfg, in)
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

// firstRTR returns the preferred type of set: Write, then Read, then Send.
func firstRTR(set RTR) RTR {
	switch {
	case set&RTRWrite != 0:
		return RTRWrite
	case set&RTRRead != 0:
		return RTRRead
	case set&RTRSend != 0:
		return RTRSend
	}
	return 0
}

// usableRTR is the set of types a responder accepts and can take now: a
// Read RTR is itself an RDMA Read, so it needs this side to accept one
// (IRD ≥ 1) and the initiator to be allowed one (its ORD ≥ 1).
func usableRTR(cfg *Config, in IRDORD) RTR {
	ok := cfg.acceptedRTR()
	if cfg.IRD == 0 || in.ORD == 0 {
		ok &^= RTRRead
	}
	return ok
}

// pickRTR chooses among the types offered and usable, preferring Write,
// then Read, then Send. siw as responder makes the same Write-then-Read
// choice (siw_proc_mpareq).
func pickRTR(cfg *Config, in IRDORD) RTR {
	return firstRTR(in.RTR & usableRTR(cfg, in))
}

// fallbackRTR names a type this side accepts when none of the offered ones
// is usable (RFC 6581 §9.2): a usable one if there is one (siw names Write
// in that case), else one it accepts at all. The initiator may still be
// able to send it (it need not have offered every type it can send), and
// terminates with error 0x07 if not.
func fallbackRTR(cfg *Config, in IRDORD) RTR {
	if r := firstRTR(usableRTR(cfg, in)); r != 0 {
		return r
	}
	return firstRTR(cfg.acceptedRTR())
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
// responder's ORD must not exceed this side's IRD unless it is
// NoAutoIRDORD, code 0x06); the RTR types the Reply names (this side picks
// one it offered, else one it can send, code 0x07 if there is none).
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
		Role:     Initiator,
		Revision: rep.Rev,
		// RFC 5044 §7.1.1: "When this bit is '1' in either the MPA
		// Request Frame or MPA Reply Frame, CRCs MUST be generated and
		// checked by both endpoints."
		CRC:             (req.Flags|rep.Flags)&FlagCRC != 0,
		SendMarkers:     rep.Flags&FlagMarkers != 0,
		RecvMarkers:     req.Flags&FlagMarkers != 0,
		PeerPrivateData: rep.PrivateData,
		Request:         *req,
		Reply:           *rep,
	}
	if rep.HasIRDORD {
		in := rep.IRDORD
		// RFC 6581 §9.1: the initiator "MUST set its IRD at least to the
		// responder ORD and its ORD at most to the responder IRD", and
		// "MUST leave its local endpoint IRD value unchanged upon
		// receiving a responder ORD value of 0x3FFF" (ORD likewise for
		// an IRD of 0x3FFF): the upper layer negotiates that value.
		if in.ORD != NoAutoIRDORD && in.ORD > cfg.IRD {
			return Result{}, protoErr(termcode.MPAInsufficientIRD, ErrInsufficientIRD, "reply ORD %d, own IRD %d", in.ORD, cfg.IRD)
		}
		res.IRDORDKnown = true
		res.IRD, res.ORD = cfg.IRD, min(cfg.ORD, in.IRD)
		if in.IRD == NoAutoIRDORD {
			res.ORD = cfg.ORD
		}
		res.PeerIRD, res.PeerORD = in.IRD, in.ORD
		if in.P2P {
			offered := RTR(0)
			if req.HasIRDORD && req.IRDORD.P2P {
				offered = req.IRDORD.RTR
			} else {
				// RFC 6581 §9.2: "The responder MUST set Control Flag
				// A to 0 if Control Flag A is 0 in the request."
				return Result{}, protoErr(termcode.MPANoMatchingRTR, ErrNoMatchingRTR, "peer-to-peer reply to a client-server request")
			}
			rtr := chooseRTR(in.RTR, offered, cfg.sendableRTR(), res.ORD)
			if rtr == 0 {
				// "If the initiator is not able to generate any of the
				// responder-supported RTR indications, then it MUST send
				// a TERM message ... Error Code 7."
				return Result{}, protoErr(termcode.MPANoMatchingRTR, ErrNoMatchingRTR,
					"reply RTR %s, offered %s, sendable %s, ORD %d", in.RTR, offered, cfg.sendableRTR(), res.ORD)
			}
			res.P2P, res.RTR, res.SendRTR = true, rtr, true
		}
	}
	return res, nil
}

// chooseRTR is the initiator's pick among the types the Reply names
// (RFC 6581 §1.1: it "selects one of the supported RDMA message types as
// the RTR indication at the initiator's sole discretion"): one it offered
// if the Reply names one, else one it can send; Write, then Read, then
// Send. A Read RTR is itself an RDMA Read, so it needs ORD ≥ 1 after
// negotiation (which also means the responder's IRD is at least 1).
func chooseRTR(named, offered, sendable RTR, ord uint16) RTR {
	named &= sendable
	if ord == 0 {
		named &^= RTRRead
	}
	if r := firstRTR(named & offered); r != 0 {
		return r
	}
	return firstRTR(named)
}
