package stag

import (
	"fmt"
	"strings"
)

// Access is a set of rights on a region.
//
// Unlike verbs, where every region is implicitly locally readable, local read
// is an explicit right here so that each check names exactly what it needs.
type Access uint8

// The rights a region can grant.
const (
	LocalRead    Access = 1 << iota // source of local Sends and Writes
	LocalWrite                      // sink of local Receives and Read Responses
	RemoteRead                      // source of a peer's RDMA Read
	RemoteWrite                     // sink of a peer's RDMA Write
	RemoteAtomic                    // target of a peer's RFC 7306 Atomic Request
	// MWBind lets memory windows be bound to the region (Window.Bind),
	// as verbs' IBV_ACCESS_MW_BIND: a region registered without it can
	// never be reached through a window.
	MWBind

	allAccess = LocalRead | LocalWrite | RemoteRead | RemoteWrite | RemoteAtomic | MWBind

	// remoteAccess is what a window may grant: it is only ever named by
	// peers.
	remoteAccess = RemoteRead | RemoteWrite | RemoteAtomic
)

var accessNames = [...]string{"LocalRead", "LocalWrite", "RemoteRead", "RemoteWrite", "RemoteAtomic", "MWBind"}

// Has reports whether a grants every right in need.
func (a Access) Has(need Access) bool { return a&need == need }

// Validate reports whether a is a set of rights a region may be registered
// with: known bits only, at least one right, and RemoteWrite and
// RemoteAtomic only together with LocalWrite (the verbs rule: memory the
// peer may change must be memory the owner may change).
func (a Access) Validate() error {
	switch {
	case a&^allAccess != 0:
		return fmt.Errorf("%w: unknown bits in %v", ErrBadAccess, a)
	case a == 0:
		return fmt.Errorf("%w: no rights", ErrBadAccess)
	case a.Has(RemoteWrite) && !a.Has(LocalWrite):
		return fmt.Errorf("%w: RemoteWrite requires LocalWrite", ErrBadAccess)
	case a.Has(RemoteAtomic) && !a.Has(LocalWrite):
		return fmt.Errorf("%w: RemoteAtomic requires LocalWrite", ErrBadAccess)
	}
	return nil
}

// String lists the rights joined by "|", "none" for the empty set, and the
// unknown bits in hex.
func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	var b strings.Builder
	for i, name := range accessNames {
		if a&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(name)
		}
	}
	if rest := a &^ allAccess; rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "0x%02x", uint8(rest))
	}
	return b.String()
}
