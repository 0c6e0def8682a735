// Package ddp implements the Direct Data Placement protocol of RFC 5041 as
// used by iWARP over MPA/TCP: header views and encoders for the tagged and
// untagged buffer models, segmentation of a message into segments that fit
// the lower layer's maximum ULPDU, and the receive-side checks that decide
// whether a segment may be placed.
//
// The package does no I/O and imports no other package of this module but
// termcode. The
// upper layer (RDMAP) owns the reserved-for-ULP octets of each header; ddp
// only carries them.
//
// Every error that requires the stream to be terminated is an [*Error]. Its
// chain holds the termcode.Code the Terminate reports (errors.As finds it),
// the one code space that the mpa and rdmap packages report in as well.
package ddp
