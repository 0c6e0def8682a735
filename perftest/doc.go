// Package perftest speaks the protocol of linux-rdma's perftest programs
// (ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat, ib_read_lat,
// ib_send_lat) with rdma_cm (-R), so that a Go program measures and is
// measured by the tools RDMA engineers already use, with the same tables.
//
// [Serve] runs a test as perftest's server on a listener of the caller's
// (any service can be benchmarked by ib_write_bw -R from a siw machine);
// [Dial] runs it as perftest's client against a perftest server. Both take
// a [Config] named after perftest's options and return the rows they
// print.
//
// # Protocol
//
// A run is two kinds of iWARP connection on one port (18515 by default):
// a comm connection, opened first, on which the sides exchange small
// Sends in strict lockstep (the client first, one 56-byte receive posted
// at a time), and then one test connection per queue pair, which the
// client opens after the fifth exchange. [Protocol] is that conversation
// as a state machine over bytes: the version, the page and cache-line
// sizes, the MTU, the handshakes carrying each side's struct
// pingpong_dest ([Dest]), the test connections, the measurements and, for
// the bandwidth tests, the client's report ([BWReport]). It does no I/O;
// Dial and Serve drive it over package conn. docs/perftest.md lists each
// test's sequence.
//
// # Versions
//
// The conversation is that of perftest 6.06 (Debian 12's perftest
// 4.5+0.17), which this side announces whatever the peer's version.
// Peers of 5.70 and later accept it (perftest refuses older ones), and
// peers of 6.28 and later then skip their parameter negotiation, which
// they gate on the remote version. The one thing taken from the peer's
// version is the size of its struct pingpong_dest: 56 bytes, or 64 from
// 6.29. 6.06 is tested against siw; 6.28 and 6.29 are supported from
// their sources, untested.
//
// # Differences from perftest
//
// Time is taken from Go's monotonic clock, so nothing is calibrated
// (perftest calibrates its CPU clock against gettimeofday, which fails in
// a virtual machine whose clock source is an emulated device). Where
// perftest carves one buffer into halves, this side registers a region
// per use, so that no memory is sent from while the peer places into it.
// write_lat and a send_bw client read memory that the peer's RDMA Writes
// fill while they fill it (the last byte of the buffer; the credit word);
// they use watched regions of package conn for that.
package perftest
