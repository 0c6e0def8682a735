package conn

import (
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// sendOpInfo is what the library knows of one send-queue operation: a new
// operation is one entry here and its start function.
type sendOpInfo struct {
	name string
	need Access   // the local right its SGL needs
	wc   WCOpcode // the opcode of its completion
	// rdma is the RDMAP opcode of a Send variant.
	rdma rdmap.Opcode
	// ext is the extension both sides must have negotiated.
	ext rdmap.Extensions
	// start frames the work request (or carries it out, if it puts
	// nothing on the wire). Called with the transmit token and QP.mu held.
	start func(e *engine, op *sendOpInfo, ctr uint32, w *sendWQE, refs []sgeRef)
}

var sendOps = [...]sendOpInfo{
	OpSend:      {name: "send", need: stag.LocalRead, wc: WCSend, rdma: rdmap.OpSend, start: (*engine).startSend},
	OpSendInv:   {name: "send-inv", need: stag.LocalRead, wc: WCSend, rdma: rdmap.OpSendInvalidate, start: (*engine).startSend},
	OpSendSE:    {name: "send-se", need: stag.LocalRead, wc: WCSend, rdma: rdmap.OpSendSE, start: (*engine).startSend},
	OpSendSEInv: {name: "send-se-inv", need: stag.LocalRead, wc: WCSend, rdma: rdmap.OpSendSEInvalidate, start: (*engine).startSend},
	OpWrite:     {name: "write", need: stag.LocalRead, wc: WCRDMAWrite, start: (*engine).startWrite},
	OpRead:      {name: "read", need: LocalWrite, wc: WCRDMARead, start: (*engine).startReadRequest},
	OpLocalInv:  {name: "local-inv", need: 0, wc: WCLocalInv, start: (*engine).startLocalInv},
	OpFlush:     {name: "flush", need: 0, wc: WCFlush, ext: rdmap.ExtFlush, start: (*engine).startFlush},
	OpFetchAdd:  {name: "fetch-add", need: LocalWrite, wc: WCFetchAdd, ext: rdmap.ExtRFC7306, start: (*engine).startAtomic},
	OpCmpSwap:   {name: "cmp-swap", need: LocalWrite, wc: WCCompSwap, ext: rdmap.ExtRFC7306, start: (*engine).startAtomic},
	OpWriteImm:  {name: "write-imm", need: stag.LocalRead, wc: WCRDMAWrite, ext: rdmap.ExtRFC7306, start: (*engine).startWrite},
	OpSendImm:   {name: "send-imm", need: 0, wc: WCSend, ext: rdmap.ExtRFC7306, start: (*engine).startSendImm},
	OpBindMW:    {name: "bind-mw", need: 0, wc: WCBindMW, start: (*engine).startBindMW},
}
