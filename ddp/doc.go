// Package ddp implements the Direct Data Placement protocol of RFC 5041 as
// used by iWARP over MPA/TCP: header views and encoders for the tagged and
// untagged buffer models, segmentation of a message into segments that fit
// the lower layer's maximum ULPDU, and the receive-side checks that decide
// whether a segment may be placed.
//
// The package does no I/O and imports no other package of this module. The
// upper layer (RDMAP) owns the reserved-for-ULP octets of each header; ddp
// only carries them.
//
// Every error that requires the stream to be terminated is an [*Error]. It
// implements TerminateCode() uint16, returning layer<<12 | type<<8 | code as
// carried in the RDMAP Terminate Control field; the same method is
// implemented by the error types of the mpa and rdmap packages.
package ddp
