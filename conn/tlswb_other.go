//go:build !unix

package conn

import "syscall"

// canTryWrite is false where the socket has no portable non-blocking
// write: every sealed record then goes to the backlog, which the
// transmitter drains.
const canTryWrite = false

type tryState struct{}

func (*tryState) init() {}

func (*tryState) write(syscall.RawConn, []byte) (int, error) { return 0, nil }
