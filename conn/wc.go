package conn

import (
	"errors"
	"fmt"
)

// WCStatus is the status of a work completion. The names, meanings and
// values are libibverbs' enum ibv_wc_status, so that programs ported from
// verbs read the same. Not every status can occur over iWARP; this package
// produces:
//
//   - WCSuccess;
//   - WCWRFlushErr: the queue pair left the connected state before the work
//     request could finish (Close, a peer's FIN or reset, a Terminate);
//   - WCLocProtErr: a local invalidate of an STag this side may not
//     invalidate;
//   - WCMWBindErr: an OpBindMW the window or region refuses (MW.Bind's
//     rules);
//   - WCLocQPOpErr: a work request that cannot be carried out at all (an
//     RDMA Write whose tagged offset would wrap);
//   - WCRemAccessErr, WCRemInvReqErr, WCRemOpErr: the peer answered the
//     work request with a Terminate — a protection or tagged-buffer error,
//     an untagged-buffer or malformed-request error, any other (wc.Err
//     wraps the *rdmap.TerminateError).
//
// The others are defined for completeness and never occur.
type WCStatus uint8

const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocEECOpErr
	WCLocProtErr
	WCWRFlushErr
	WCMWBindErr
	WCBadRespErr
	WCLocAccessErr
	WCRemInvReqErr
	WCRemAccessErr
	WCRemOpErr
	WCRetryExcErr
	WCRNRRetryExcErr
	WCLocRDDViolErr
	WCRemInvRDReqErr
	WCRemAbortErr
	WCInvEECNErr
	WCInvEECStateErr
	WCFatalErr
	WCRespTimeoutErr
	WCGeneralErr
)

var wcStatusNames = [...]string{
	WCSuccess:        "success",
	WCLocLenErr:      "local length error",
	WCLocQPOpErr:     "local QP operation error",
	WCLocEECOpErr:    "local EE context operation error",
	WCLocProtErr:     "local protection error",
	WCWRFlushErr:     "work request flushed error",
	WCMWBindErr:      "memory window bind error",
	WCBadRespErr:     "bad response error",
	WCLocAccessErr:   "local access error",
	WCRemInvReqErr:   "remote invalid request error",
	WCRemAccessErr:   "remote access error",
	WCRemOpErr:       "remote operation error",
	WCRetryExcErr:    "transport retry counter exceeded",
	WCRNRRetryExcErr: "RNR retry counter exceeded",
	WCLocRDDViolErr:  "local RDD violation error",
	WCRemInvRDReqErr: "remote invalid RD request",
	WCRemAbortErr:    "operation aborted",
	WCInvEECNErr:     "invalid EE context number",
	WCInvEECStateErr: "invalid EE context state",
	WCFatalErr:       "fatal error",
	WCRespTimeoutErr: "response timeout error",
	WCGeneralErr:     "general error",
}

func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("WCStatus(%d)", uint8(s))
}

// WCOpcode says which kind of work request a completion belongs to.
type WCOpcode uint8

const (
	WCSend WCOpcode = iota
	WCRDMAWrite
	WCRDMARead
	WCLocalInv
	WCRecv
	WCFlush
	WCCompSwap // RFC 7306 CmpSwap
	WCFetchAdd // RFC 7306 FetchAdd
	WCBindMW   // OpBindMW
)

// wcOpNames are the completion opcodes' names, one entry per WCOpcode:
// an operation's work request name (sendOps) is a different spelling,
// since several operations complete with one opcode.
var wcOpNames = [...]string{
	WCSend:      "send",
	WCRDMAWrite: "rdma-write",
	WCRDMARead:  "rdma-read",
	WCLocalInv:  "local-inv",
	WCRecv:      "recv",
	WCFlush:     "flush",
	WCCompSwap:  "comp-swap",
	WCFetchAdd:  "fetch-add",
	WCBindMW:    "bind-mw",
}

func (o WCOpcode) String() string {
	if int(o) < len(wcOpNames) {
		return wcOpNames[o]
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// WCFlags qualify a receive completion.
type WCFlags uint8

const (
	// WCWithInv: the Send carried an STag that was invalidated (InvSTag).
	WCWithInv WCFlags = 1 << iota
	// WCSolicited: the Send asked for a solicited event.
	WCSolicited
	// WCFlushPersistent: an OpFlush's range is persistent at the peer (it
	// is visible whenever an OpFlush succeeds).
	WCFlushPersistent
	// WCWithImm: the receive was consumed by an RFC 7306 Immediate Data
	// message (OpWriteImm, OpSendImm); its value is WorkCompletion.Imm.
	WCWithImm
)

// WorkCompletion reports the end of one work request. It is a plain value:
// completions are copied into the CQ ring and out again without allocation.
type WorkCompletion struct {
	ID      uint64
	QPN     uint32
	Status  WCStatus
	Op      WCOpcode
	Flags   WCFlags
	ByteLen uint32
	// InvSTag is the STag a received Send with Invalidate invalidated.
	InvSTag uint32
	// Imm is the immediate data of a receive completion with WCWithImm.
	Imm uint64
	err error
}

// Err returns nil for a successful completion, and otherwise a
// *CompletionError whose cause (errors.Unwrap) is the error that ended the
// work request — for example a *rdmap.TerminateError sent or received.
func (wc *WorkCompletion) Err() error {
	if wc.Status == WCSuccess {
		return nil
	}
	return &CompletionError{Status: wc.Status, Op: wc.Op, ID: wc.ID, Err: wc.err}
}

// CompletionError is the error of an unsuccessful work completion.
type CompletionError struct {
	Status WCStatus
	Op     WCOpcode
	ID     uint64
	Err    error
}

func (e *CompletionError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("iwarp: %s work request %d: %s: %v", e.Op, e.ID, e.Status, e.Err)
	}
	return fmt.Sprintf("iwarp: %s work request %d: %s", e.Op, e.ID, e.Status)
}

func (e *CompletionError) Unwrap() error { return e.Err }

// Is lets errors.Is(err, ErrFlushed) match flushed completions.
func (e *CompletionError) Is(target error) bool {
	return target == ErrFlushed && e.Status == WCWRFlushErr
}

// ErrFlushed matches (errors.Is) the error of a work request that was flushed
// because its queue pair left the ready-to-send state before it could run.
var ErrFlushed = errors.New("iwarp: work request flushed")
