// Package capture turns packet captures into TCP byte streams and back.
//
// The reading side ([ReadFile], [Read]) decodes a pcap or pcapng file,
// groups its TCP segments into connections and reassembles each direction
// into one contiguous byte stream, remembering which capture frame carried
// each stream byte. Frame numbers are 1-based, counting every record in the
// file, the same way tshark numbers frames, so a test failure can name the
// frame to open in Wireshark.
//
// The writing side ([Writer]) produces a well-formed capture of a synthetic
// TCP conversation: a real three-way handshake, consistent sequence and
// acknowledgement numbers, one TCP segment per payload chunk and a FIN
// exchange at the end. It is streaming ([Conn.Segment] per chunk) so that a
// live tap can feed it the bytes a connection actually sends.
package capture
