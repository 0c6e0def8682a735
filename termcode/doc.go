// Package termcode is the one error-code space of iWARP: the layer, error
// type and error code that a Terminate message carries (RFC 5040 §4.8, the
// Terminate Control field), with the names the IANA RDDP registry gives
// them (RFC 6580: "RDMAP Errors", "DDP Errors", "MPA Errors").
//
// Every layer of this module reports a failure that ends a stream as an
// error whose chain holds a [Code]: the MPA framing errors of package mpa,
// the DDP receive checks of package ddp and the RDMAP conditions of package
// rdmap. A caller finds it with errors.As (or [Of]) and compares it with the
// constants here, whichever layer found the failure:
//
//	var c termcode.Code
//	if errors.As(err, &c) && c == termcode.MPACRC { ... }
//
// The package does no I/O and imports nothing of this module; it is the
// bottom of the import graph.
package termcode
