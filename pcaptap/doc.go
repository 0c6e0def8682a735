// Package pcaptap records the traffic of live connections as a pcap capture
// that Wireshark, tshark and package dissect can open.
//
// A Tap implements conn.Tap: pass it with conn.WithTap and every byte the
// queue pair sends and receives, the MPA Request and Reply included, is
// written to the capture as Ethernet/IP/TCP frames with the connection's
// real addresses and ports. A Tap may record many connections into one
// file and is safe for concurrent use.
//
// The capture is synthesised from the bytes the application moved, not
// sniffed from an interface: it needs no privileges, and what it shows is
// exactly the byte stream each side saw. TCP framing is made up to match:
// a three-way handshake when the connection is first used, one segment per
// Read or Write (split at 65,495 bytes), sequence and acknowledgement
// numbers consistent in both directions, and a FIN exchange on Close.
// Segment boundaries therefore follow the application's reads and writes,
// not the segments that crossed the network.
package pcaptap
