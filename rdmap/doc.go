// Package rdmap implements the RDMA Protocol of RFC 5040 on top of package
// ddp: opcodes and the RDMAP control field, full-header encoders for each
// message kind, a decoder that classifies and validates the header of an
// inbound ULPDU, the RDMA Read Request header, and the Terminate message
// with its error codes.
//
// The package does no I/O. A connection engine (package conn) reads a
// ULPDU's header through mpa.Reader, classifies it with [Parse], runs the
// DDP and region checks, and on any failure sends the Terminate that
// [NewTerminate] builds from the error, then closes the stream.
//
// Error codes are termcode.Code values, the one code space of every layer;
// any error whose chain holds one (from ddp, mpa or this package) can be
// turned into a Terminate. docs/rfc-notes/terminate.md is the normative
// table of conditions and codes; a test checks [Conditions] against it row
// by row.
package rdmap
