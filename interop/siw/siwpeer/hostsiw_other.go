//go:build !linux

package siwpeer

import (
	"context"
	"errors"
)

// hostSiw needs a Linux host whose kernel has siw.
func (r *runner) hostSiw(context.Context, Program, *invocation) (int, error) {
	return 0, fail(ExitUsage, "--host-siw: %v (it needs a Linux host with the siw module)", errors.ErrUnsupported)
}
