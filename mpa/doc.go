// Package mpa implements Marker PDU Aligned framing (RFC 5044) with the
// enhanced connection setup of RFC 6581, as spoken by the Linux soft-iWARP
// driver (siw).
//
// Connection setup: an initiator calls [Connect]; a responder calls
// [ReadRequest], inspects the Request's private data and answers with
// [Request.Accept] or [Request.Reject]. The decisions themselves are pure
// functions over frames ([BuildRequest], [AnswerRequest], [CheckReply],
// [RejectReply]) so they can be tested and fuzzed without a network.
// Both sides end with a [Result]: CRC, markers per direction, IRD/ORD,
// peer-to-peer mode and the ordering duties of the upper layer.
//
// Framing: a [Reader] takes FPDUs off the stream in steps (length, header
// peek, payload read straight into the caller's memory, trailer check), and
// a [Writer] builds FPDUs as net.Buffers that go out with one writev per
// Flush. Both handle CRC32c and markers.
//
// Failures that the upper layer reports in a Terminate are *Error values
// whose chain holds a termcode.Code (an LLP code, layer 2): the one code
// space the ddp and rdmap packages report in as well.
package mpa
