package rdmap

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpcodes_RFC5040_4_1(t *testing.T) {
	for _, tc := range []struct {
		op            Opcode
		val           uint8
		name          string
		tagged        bool
		qn            uint32
		hdrLen        int
		send, inv, se bool
		ctrl          byte
	}{
		{OpWrite, 0, "RDMA Write", true, 0, 14, false, false, false, 0x40},
		{OpReadRequest, 1, "RDMA Read Request", false, 1, 46, false, false, false, 0x41},
		{OpReadResponse, 2, "RDMA Read Response", true, 0, 14, false, false, false, 0x42},
		{OpSend, 3, "Send", false, 0, 18, true, false, false, 0x43},
		{OpSendInvalidate, 4, "Send with Invalidate", false, 0, 18, true, true, false, 0x44},
		{OpSendSE, 5, "Send with Solicited Event", false, 0, 18, true, false, true, 0x45},
		{OpSendSEInvalidate, 6, "Send with Solicited Event and Invalidate", false, 0, 18, true, true, true, 0x46},
		{OpTerminate, 7, "Terminate", false, 2, 22, false, false, false, 0x47},
	} {
		require.Equal(t, tc.val, uint8(tc.op))
		require.Equal(t, tc.name, tc.op.String())
		require.True(t, tc.op.Defined())
		require.Equal(t, tc.tagged, tc.op.Tagged(), tc.name)
		require.Equal(t, tc.qn, tc.op.QN(), tc.name)
		require.Equal(t, tc.hdrLen, tc.op.HeaderLen(), tc.name)
		require.Equal(t, tc.send, tc.op.IsSend(), tc.name)
		require.Equal(t, tc.inv, tc.op.Invalidates(), tc.name)
		require.Equal(t, tc.se, tc.op.Solicited(), tc.name)
		require.Equal(t, tc.ctrl, MakeControl(tc.op), tc.name)
		require.Equal(t, uint8(1), ControlVersion(MakeControl(tc.op)))
		require.Equal(t, tc.op, ControlOpcode(MakeControl(tc.op)))
	}
	for op := OpWrite; op <= OpTerminate; op++ {
		require.Zero(t, op.Extension(), op)
	}
	// OpExtension is the Flush extension's.
	require.True(t, OpExtension.Defined())
	require.Equal(t, ExtFlush, OpExtension.Extension())
	require.Equal(t, "extension", OpExtension.Label())
	// RFC 7306 (IANA RDDP registry): 0x8–0xB, negotiated.
	for _, tc := range []struct {
		op     Opcode
		name   string
		qn     uint32
		hdrLen int
		se     bool
	}{
		{OpImmediate, "Immediate Data", 0, 26, false},
		{OpImmediateSE, "Immediate Data with Solicited Event", 0, 26, true},
		{OpAtomicRequest, "Atomic Request", 1, 70, false},
		{OpAtomicResponse, "Atomic Response", 3, 30, false},
	} {
		require.True(t, tc.op.Defined(), tc.name)
		require.Equal(t, ExtRFC7306, tc.op.Extension(), tc.name)
		require.Equal(t, tc.name, tc.op.String())
		require.Equal(t, tc.qn, tc.op.QN(), tc.name)
		require.Equal(t, tc.hdrLen, tc.op.HeaderLen(), tc.name)
		require.Equal(t, tc.se, tc.op.Solicited(), tc.name)
		require.False(t, tc.op.Tagged(), tc.name)
		require.False(t, tc.op.IsSend(), tc.name)
	}
	// The rest are not defined.
	for op := Opcode(0xc); op < 20; op++ {
		if op == OpExtension {
			continue
		}
		require.False(t, op.Defined(), op)
		require.False(t, op.Tagged())
		require.False(t, op.IsSend())
		require.Zero(t, op.HeaderLen())
	}
	require.Equal(t, "opcode 0xc", Opcode(0xc).String())
	require.Equal(t, "opcode 0x14", Opcode(20).String())
}

func TestHeaderLengths_Pinned(t *testing.T) {
	require.Equal(t, 14, WriteHeaderLen)
	require.Equal(t, 14, ReadResponseHeaderLen)
	require.Equal(t, 18, SendHeaderLen)
	require.Equal(t, 28, ReadRequestBodyLen)
	require.Equal(t, 46, ReadRequestHeaderLen)
	require.Equal(t, 22, TerminateHeaderLen)
	require.Equal(t, 70, MaxTerminateLen)
	require.Equal(t, 70, MaxHeaderLen) // RFC 7306 Atomic Request
	require.Equal(t, uint32(0), QNSend)
	require.Equal(t, uint32(1), QNReadRequest)
	require.Equal(t, uint32(2), QNTerminate)
	require.Equal(t, 3, NumQueues)
}
