package dissect

// TsharkArgs are the options that make tshark (and Wireshark, with the
// same settings in a profile) dissect an iWARP capture as this package
// does:
//
//   - tcp.desegment_tcp_streams: reassemble FPDUs that span segments.
//   - tcp.try_heuristic_first: try the MPA heuristic before dissectors
//     chosen by port number; an ephemeral port may be another protocol's
//     registered one (48898 makes Wireshark read a stream as TwinCAT ADS).
//   - the iwarp_mpa_tcp heuristic on: MPA has no port of its own (the
//     heuristic is on by default; a profile may have turned it off).
//   - the rpcrdma_iwarp heuristic off: Wireshark's RPC-over-RDMA dissector
//     otherwise claims small Sends (an 8-byte Send, say) as RPC-over-RDMA
//     messages and marks them "Malformed Packet".
//
// In Wireshark itself: Analyze › Enabled Protocols, search for
// "rpcrdma_iwarp" and untick "RPC-over-RDMA on iWARP"; the setting is kept
// in the profile's heuristic_protos file as the line "rpcrdma_iwarp,0".
var TsharkArgs = []string{
	"-o", "tcp.desegment_tcp_streams:TRUE",
	"-o", "tcp.try_heuristic_first:TRUE",
	"--enable-heuristic", "iwarp_mpa_tcp",
	"--disable-heuristic", "rpcrdma_iwarp",
}

// TsharkCommand is the tshark command line, program name first, that
// dissects the capture at path with TsharkArgs.
func TsharkCommand(path string) []string {
	return append([]string{"tshark", "-r", path}, TsharkArgs...)
}
