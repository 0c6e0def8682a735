package mpa

import (
	"fmt"
	"math/bits"
)

// CRCMode says how a side negotiates the MPA CRC (RFC 5044 §7.1.1, C
// flag). C declares a side's preference; CRC is in use in both directions
// when either the Request or the Reply has C set, and off only when
// neither has (RFC 5044 §7.1.1, §4.4 (2b)).
//
// A responder in every mode sets C whenever the Request has it, so that an
// initiator that follows the Reply's C alone (siw does) agrees with it.
type CRCMode uint8

const (
	// CRCPreferred: this side sets C, so CRC is always in use. This is
	// the zero value (RFC 5044 §4.4: "The default configuration for a
	// connection MUST be to use CRCs").
	CRCPreferred CRCMode = iota
	// CRCRequired: as Preferred, and an initiator also fails when the
	// Reply does not itself set C. The RFC would run with CRC anyway;
	// this refuses responders that may instead follow their own C bit.
	CRCRequired
	// CRCOff: the initiator does not set C, and the responder sets C
	// only when the Request has it. CRC is then off only if the peer
	// does not ask for it either.
	CRCOff
)

func (m CRCMode) String() string {
	switch m {
	case CRCPreferred:
		return "preferred"
	case CRCRequired:
		return "required"
	case CRCOff:
		return "off"
	}
	return fmt.Sprintf("CRCMode(%d)", uint8(m))
}

// MaxAdvertisedIRDORD is the largest IRD or ORD this package advertises:
// siw caps both at 128 (SIW_MAX_IRD_QP, SIW_MAX_ORD_QP) and rounds its
// queues up to powers of two (siw_qp_readq_init).
const MaxAdvertisedIRDORD = 128

// Config is one side's MPA connection setup policy. The zero value is a
// valid siw-safe configuration: revision 2 with enhanced setup, CRC
// preferred, no markers requested, IRD = ORD = 0, no peer-to-peer mode.
type Config struct {
	// Revision is the revision an initiator requests: 1 (RFC 5044) or 2
	// (RFC 6581); zero means 2. A responder answers with the Request's
	// revision whatever this says.
	Revision uint8
	// NoEnhanced makes an initiator send revision 2 without the Enhanced
	// flag, so no IRD/ORD block and no peer-to-peer negotiation. A
	// responder follows the Request.
	NoEnhanced bool

	CRC CRCMode

	// RequestMarkers sets M in this side's frame: the peer is asked to put
	// markers into the stream it sends.
	RequestMarkers bool
	// RefuseMarkers makes a peer's M fatal instead of inserting markers
	// into the stream this side sends. siw refuses markers.
	RefuseMarkers bool

	// IRD is how many RDMA Read Requests this side accepts outstanding;
	// ORD how many it wants to issue. Each is 0 or a power of two up to
	// 128.
	IRD, ORD uint16

	// P2P makes an initiator ask for RFC 6581 peer-to-peer mode. A
	// responder answers a Request that asks for it in peer-to-peer mode
	// whether P2P is set or not: RFC 6581 §9.2, "If Control Flag A is 1
	// in the MPA Request message, then the responder MUST set Control
	// Flag A to 1 in the MPA reply message".
	P2P bool
	// RTR is, for an initiator with P2P, the RTR types offered (zero
	// offers Write, the one siw picks when offered); for a responder,
	// the types it can receive (zero means Write and Read).
	RTR RTR
	// SendableRTR is, for an initiator, every RTR type it is able to
	// send; zero means all three (conn sends each, in siw's forms). A
	// Reply may name types that were not offered (RFC 6581 §9.2: the
	// responder "MAY include additional RTR indication options it
	// supports"); the initiator picks one it offered if the Reply names
	// one, else one of these, and fails with error 0x07 if there is
	// none. It must include the types offered.
	SendableRTR RTR

	// AcceptDowngrade lets an initiator that sent an enhanced Request
	// accept a revision-1 Reply or a revision-2 Reply without the
	// Enhanced flag. siw as initiator refuses such replies; so does this
	// package unless set.
	AcceptDowngrade bool

	// PeerIsIwarpGo lifts the limits that protect a siw peer. When false
	// (the default: "the peer may be siw"), outgoing private data is
	// limited to 251 bytes and PD_Length to 256.
	PeerIsIwarpGo bool

	// MaxPrivateData bounds the PD_Length accepted from the peer; zero
	// means 512, RFC 5044's maximum.
	MaxPrivateData int
}

func (c *Config) revision() uint8 {
	if c.Revision == 0 {
		return 2
	}
	return c.Revision
}

// enhanced reports whether this side's own frames use RFC 6581 setup.
func (c *Config) enhanced() bool { return c.revision() == 2 && !c.NoEnhanced }

// offeredRTR is the set of RTR types an initiator with P2P offers: Write
// unless configured. sendableRTR is the set it can send: all three unless
// configured. acceptedRTR is the set a responder can receive: Write and
// Read unless configured.
func (c *Config) offeredRTR() RTR  { return rtrOr(c.RTR, RTRWrite) }
func (c *Config) sendableRTR() RTR { return rtrOr(c.SendableRTR, rtrAll) }
func (c *Config) acceptedRTR() RTR { return rtrOr(c.RTR, RTRWrite|RTRRead) }

func rtrOr(r, def RTR) RTR {
	if r == 0 {
		return def
	}
	return r
}

func (c *Config) maxRecvPD() int {
	if c.MaxPrivateData == 0 {
		return MaxPrivateData
	}
	return c.MaxPrivateData
}

// Validate reports configuration errors, each wrapping ErrConfig.
func (c *Config) Validate() error {
	if c.Revision > 2 {
		return fmt.Errorf("%w: revision %d (1 or 2)", ErrConfig, c.Revision)
	}
	if c.CRC > CRCOff {
		return fmt.Errorf("%w: CRC mode %d", ErrConfig, c.CRC)
	}
	if c.RequestMarkers && c.RefuseMarkers {
		return fmt.Errorf("%w: markers both requested and refused", ErrConfig)
	}
	for _, v := range []struct {
		name string
		n    uint16
	}{{"IRD", c.IRD}, {"ORD", c.ORD}} {
		if v.n > MaxAdvertisedIRDORD || (v.n != 0 && bits.OnesCount16(v.n) != 1) {
			return fmt.Errorf("%w: %s %d (0 or a power of two up to %d)", ErrConfig, v.name, v.n, MaxAdvertisedIRDORD)
		}
	}
	if c.RTR&^rtrAll != 0 {
		return fmt.Errorf("%w: RTR bits 0x%02x", ErrConfig, uint8(c.RTR))
	}
	if c.SendableRTR&^rtrAll != 0 {
		return fmt.Errorf("%w: SendableRTR bits 0x%02x", ErrConfig, uint8(c.SendableRTR))
	}
	if c.P2P && c.SendableRTR != 0 && c.offeredRTR()&^c.SendableRTR != 0 {
		return fmt.Errorf("%w: RTR types %s offered, only %s sendable", ErrConfig, c.offeredRTR(), c.SendableRTR)
	}
	if c.P2P && !c.enhanced() {
		return fmt.Errorf("%w: peer-to-peer mode needs revision 2 with enhanced setup", ErrConfig)
	}
	if c.MaxPrivateData < 0 || c.MaxPrivateData > MaxPrivateData {
		return fmt.Errorf("%w: MaxPrivateData %d (0 to %d)", ErrConfig, c.MaxPrivateData, MaxPrivateData)
	}
	return nil
}

// checkOutgoingPD enforces the private data limits for a frame this side
// sends, with or without the IRD/ORD block.
func (c *Config) checkOutgoingPD(pd []byte, block bool) error {
	n := len(pd)
	if block {
		n += IRDORDLen
	}
	if !c.PeerIsIwarpGo && (len(pd) > SiwMaxPrivateData || n > SiwMaxPDLength) {
		return fmt.Errorf("%w: %d bytes of private data; siw accepts PD_Length up to %d and its 8-bit length "+
			"arithmetic wraps above %d application bytes (set PeerIsIwarpGo when the peer is known not to be siw)",
			ErrSiwLimit, len(pd), SiwMaxPDLength, SiwMaxPrivateData)
	}
	if n > MaxPrivateData {
		return fmt.Errorf("%w: PD_Length %d over %d", ErrPrivateDataLength, n, MaxPrivateData)
	}
	return nil
}
