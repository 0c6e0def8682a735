// Package iwtest is the Go peer of the iwtest RDMA test program
// (interop/siw/cprog/iwtest.c, protocol in interop/siw/cprog/PROTOCOL.md):
// a client drives phases of RDMA Write, Read, Send, Send with Solicited
// Event, Send with Invalidate and multi-SGE Send and Write, in both
// directions, over 32-byte control messages; both sides check every byte
// of the data pattern, and print one report line per result.
//
// The control messages (appendCtrl, parseCtrl), the data pattern (Pattern)
// and the buffer layouts are pure functions over bytes; Client and Serve
// run the sessions over conn.
package iwtest
