// Package dissect decodes iWARP traffic in packet captures: MPA Request and
// Reply frames (RFC 5044 §7, RFC 6581), MPA FPDUs (RFC 5044 §4, markers of
// §5 removed), DDP segment headers (RFC 5041) and RDMAP messages (RFC
// 5040), Terminates included.
//
// Two ways in:
//
//   - Decode and DecodeFile follow whole connections. Each direction is
//     reassembled by TCP sequence number and fed to the same mpa.Reader
//     the live stack uses, configured from the Request and Reply the
//     capture holds (CRC, markers per direction), so FPDUs split across
//     segments or packed several to a segment come out whole. The result
//     lists, per TCP connection, the MPA setup, every FPDU with the frames
//     that carried it, its CRC verdict and its DDP/RDMAP fields, and notes
//     for what cannot be decoded (a missing handshake, a capture that ends
//     inside an FPDU, a receive check that fails).
//
//   - gopacket layers (LayerTypeMPAFrame, LayerTypeMPA, LayerTypeDDP,
//     LayerTypeRDMAP) decode single packets, with gopacket.NewPacket after
//     RegisterTCPPort or with a gopacket.DecodingLayerParser, and serialize
//     them back.
//
// Headers are decoded by packages mpa, ddp and rdmap; this package adds no
// parser of its own. Malformed input never panics: it is reported with the
// error a receiver would raise and, where there is one, the Terminate it
// would send.
package dissect
