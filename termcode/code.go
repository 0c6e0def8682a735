package termcode

import (
	"errors"
	"strconv"
)

// Layer is the 4-bit Layer field of a Terminate: which layer found the
// error (RFC 5040 §4.8).
type Layer uint8

// Layers.
const (
	RDMAP Layer = 0
	DDP   Layer = 1
	LLP   Layer = 2 // the lower-layer protocol: MPA over TCP
)

var layerNames = [...]string{RDMAP: "RDMAP", DDP: "DDP", LLP: "LLP"}

// String names the layer.
func (l Layer) String() string {
	if int(l) < len(layerNames) {
		return layerNames[l]
	}
	return "layer " + strconv.Itoa(int(l))
}

// Code is a Terminate error: layer (4 bits), error type (4 bits) and error
// code (8 bits), encoded as layer<<12 | etype<<8 | ecode — the order of the
// first 16 bits of the Terminate Control field in the RFC 5040 layout and
// the notation of the IANA registry.
//
// Code implements error so that it can sit in an error chain; the zero
// value is RDMAP local catastrophic error (0/0/0x00).
type Code uint16

// Make assembles a code from its parts (layer and etype are masked to 4
// bits).
func Make(layer Layer, etype, ecode uint8) Code {
	return Code(layer&0x0f)<<12 | Code(etype&0x0f)<<8 | Code(ecode)
}

// Layer returns the layer that found the error.
func (c Code) Layer() Layer { return Layer(c >> 12) }

// EType returns the error type.
func (c Code) EType() uint8 { return uint8(c>>8) & 0x0f }

// ECode returns the error code.
func (c Code) ECode() uint8 { return uint8(c) }

// Error returns the same text as String.
func (c Code) Error() string { return c.String() }

// Of returns the first Code in err's chain. ok is false if there is none.
func Of(err error) (c Code, ok bool) {
	ok = errors.As(err, &c)
	return c, ok
}
