// Package rpma holds the wire formats a peer of PMDK's librpma 1.2 exchanges
// outside the RDMA operations themselves, as pure functions over bytes:
//
//   - the 21-byte memory-region descriptor (rpma_mr_get_descriptor) and the
//     1-byte peer-configuration descriptor (rpma_peer_cfg_get_descriptor);
//   - the 28-byte struct common_data that librpma's example servers put in
//     their connection private data (examples/common/common-conn.h);
//   - the GPSPM_flush_request and GPSPM_flush_response protobuf messages of
//     the general-purpose server persistency example
//     (examples/common/gpspm/GPSPM_flush.proto), encoded by hand: no
//     protobuf dependency.
//
// The package does no I/O and depends on nothing in this module, so both a
// target (a pmemsink served to librpma clients) and an initiator (a Go client
// of a librpma server) can use it. Decoders never panic, never read past
// their input, and reject what librpma would reject with an error that
// unwraps to [ErrMalformed].
//
// Every constant and layout here was checked field by field against the
// librpma 1.2.0 sources: src/include/librpma.h (usage bits), src/mr.c
// (RPMA_MR_DESC_SIZE, rpma_mr_get_descriptor, rpma_mr_remote_from_descriptor),
// src/peer_cfg.c, examples/common/common-conn.h, examples/0[4579]-*/server.c
// and client.c, and examples/common/gpspm/GPSPM_flush.proto with its
// protobuf-c output.
package rpma
