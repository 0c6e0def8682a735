// Package rping is a client and a server of rdma-core's rping
// (librdmacm/examples/rping.c), wire-compatible with it over siw: the same
// messages, the same RDMA operations in the same order, the same ping
// pattern and, on stdout and stderr, the lines rping prints.
//
// Per iteration the client advertises its source buffer in a Send; the
// server RDMA Reads the ping from it and says go ahead; the client
// advertises its sink buffer; the server RDMA Writes the ping back and
// says go ahead. The message formats and the ping pattern are pure
// functions (AppendInfo, ParseInfo, FillPing); Client and Serve run them
// over conn.
package rping
