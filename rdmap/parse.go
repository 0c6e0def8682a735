package rdmap

import "github.com/iwarp-go/iwarp-go/ddp"

// Header is the classified header of an inbound ULPDU. Its views alias the
// bytes given to Parse.
type Header struct {
	Op Opcode
	// Ext is the extension type of an OpExtension message, else 0.
	Ext  ExtType
	Last bool
	// Len is the header length (DDP and RDMAP headers); the payload
	// follows.
	Len int
	// PayloadLen is the ULPDU length minus Len.
	PayloadLen int

	b []byte // the header's Len bytes
}

// Bytes returns the header bytes (Len of them).
func (h *Header) Bytes() []byte { return h.b }

// Tagged returns the DDP header of an RDMA Write or Read Response, else nil.
func (h *Header) Tagged() ddp.Tagged {
	if h.b == nil || !h.Op.Tagged() {
		return nil
	}
	return ddp.Tagged(h.b[:ddp.TaggedHeaderLen])
}

// Untagged returns the DDP header of every other opcode, else nil.
func (h *Header) Untagged() ddp.Untagged {
	if h.b == nil || h.Op.Tagged() {
		return nil
	}
	return ddp.Untagged(h.b[:ddp.UntaggedHeaderLen])
}

// ReadRequest returns the Read Request header of an RDMA Read Request,
// else nil.
func (h *Header) ReadRequest() ReadRequest {
	if h.Op != OpReadRequest || h.b == nil {
		return nil
	}
	return ReadRequest(h.b[ddp.UntaggedHeaderLen:ReadRequestHeaderLen])
}

// FlushRequest returns the Flush Request header, or nil for another
// message.
func (h *Header) FlushRequest() FlushRequest {
	if h.Op != OpExtension || h.Ext != ExtFlushRequest || h.b == nil {
		return nil
	}
	return FlushRequest(h.b[ddp.UntaggedHeaderLen:FlushRequestHeaderLen])
}

// FlushResponse returns the Flush Response header, or nil for another
// message.
func (h *Header) FlushResponse() FlushResponse {
	if h.Op != OpExtension || h.Ext != ExtFlushResponse || h.b == nil {
		return nil
	}
	return FlushResponse(h.b[ddp.UntaggedHeaderLen:FlushResponseHeaderLen])
}

// InvalidateSTag returns the STag a Send with Invalidate asks to
// invalidate, or 0 for any other opcode.
func (h *Header) InvalidateSTag() uint32 {
	if !h.Op.Invalidates() || h.b == nil {
		return 0
	}
	return h.Untagged().RsvdULPWord()
}

// Parse classifies and checks the header of an inbound ULPDU of length
// ulpduLen (the MPA ULPDU Length). b must hold the ULPDU's first
// min(ulpduLen, MaxHeaderLen) bytes; more are ignored.
//
// Checks, in order, and the conditions they report (codes in
// docs/rfc-notes/terminate.md):
//   - DDP version (DDPVersionTagged / DDPVersionUntagged) and a ULPDU too
//     short for the DDP header (SegmentTooShort), as *ddp.Error;
//   - RDMAP version ≠ 1 (RDMAPVersion);
//   - opcode not defined, or of an extension not negotiated
//     (UnexpectedOpcode);
//   - T flag not the one the opcode uses (TaggedFlagMismatch): the segment
//     belongs to the other buffer model, so the opcode is unexpected there;
//   - ULPDU shorter than the opcode's header (SegmentTooShort);
//   - QN not the opcode's queue (UntaggedInvalidQN), except for Terminate;
//   - a Read Request that carries payload or lacks L (ReadReqMalformed);
//   - an RFC 7306 message that is not one whole segment of exactly its
//     header with zero reserved fields, or an Atomic Request whose
//     operation is not FetchAdd or CmpSwap (AtomicMalformed, 0/2/0x07).
//
// A Terminate that passes these is returned like any other header; decode
// it with ParseTerminate, which is lenient about its QN, MSN and MO. MSN
// and MO sequencing and buffer checks are the job of ddp.UntaggedQueues,
// STag checks that of the caller's regions.
//
// Parse does not allocate unless it returns an error.
func Parse(b []byte, ulpduLen int) (Header, error) { return ParseWith(b, ulpduLen, 0) }

// ParseWith is Parse for a connection that negotiated the extensions ext:
// their opcodes are accepted and checked too (OpExtension as
// [ParseExtension] describes).
func ParseWith(b []byte, ulpduLen int, ext Extensions) (Header, error) {
	c, err := ddp.CheckHeader(b, ulpduLen)
	if err != nil {
		return Header{}, err
	}
	hdrLen := ddp.HeaderLen(c)
	rc := b[1]
	if ControlVersion(rc) != Version {
		return Header{}, NewError(RDMAPVersion, b, ulpduLen, nil)
	}
	op := ControlOpcode(rc)
	if !op.Defined() || op.Extension()&^ext != 0 {
		return Header{}, NewError(UnexpectedOpcode, b, ulpduLen, nil)
	}
	if op.Tagged() != c.Tagged() {
		return Header{}, NewError(TaggedFlagMismatch, b, ulpduLen, nil)
	}
	if op == OpExtension {
		t, n, err := parseExtension(b, ulpduLen, c)
		if err != nil {
			return Header{}, err
		}
		return Header{Op: op, Ext: t, Last: true, Len: n, b: b[:n]}, nil
	}
	n := op.HeaderLen()
	if ulpduLen < n {
		return Header{}, NewError(SegmentTooShort, b[:min(len(b), ulpduLen)], ulpduLen, nil)
	}
	if len(b) < n {
		return Header{}, ddp.ErrShortBuffer
	}
	if !c.Tagged() {
		if op != OpTerminate && ddp.Untagged(b[:hdrLen]).QN() != op.QN() {
			return Header{}, NewError(UntaggedInvalidQN, b, ulpduLen, nil)
		}
		if op == OpReadRequest && (ulpduLen != n || !c.Last()) {
			return Header{}, NewError(ReadReqMalformed, b, ulpduLen, nil)
		}
		if op.Extension() == ExtRFC7306 {
			if err := check7306(op, b, ulpduLen, n, c); err != nil {
				return Header{}, err
			}
		}
	}
	return Header{Op: op, Last: c.Last(), Len: n, PayloadLen: ulpduLen - n, b: b[:n]}, nil
}

// IsWriteRTR reports whether h is a zero-length RDMA Write, the form of
// the RFC 6581 ready-to-receive message siw, irdma and cxgb4 send (STag and
// TO vary: 1/0, 0/0, 1/1). It places nothing and needs no STag lookup;
// see ddp.ZeroLengthMessage.
func (h *Header) IsWriteRTR() bool {
	return h.Op == OpWrite && h.Last && h.PayloadLen == 0
}
