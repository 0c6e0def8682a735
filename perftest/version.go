package perftest

import (
	"bytes"
	"fmt"
	"strconv"
)

// Version is a perftest version as the programs exchange it: the VERSION
// string of the build ("6.06" for Debian 12's perftest 4.5+0.17).
type Version string

// OwnVersion is the version this package announces. Its behaviour is
// perftest 6.06's, which every peer from 5.70 on understands; a peer of
// 6.28 or later skips its parameter negotiation for it, because that step
// is gated on the remote version.
const OwnVersion Version = "6.06"

// versionLen is the size of the version message (char version[16]).
const versionLen = 16

// Versions whose behaviour differs, as perftest compares them (atof).
const (
	// minPeerVersion: perftest refuses older peers
	// (check_version_compatibility).
	minPeerVersion = 5.70
	// tailMarkersVersion: from 6.29 struct pingpong_dest carries
	// tail_markers_vaddr and is 64 bytes instead of 56.
	tailMarkersVersion = 6.29
)

// number is the version as perftest reads it: atof, the longest prefix
// that parses as a decimal number, 0 if none.
func (v Version) number() float64 {
	s := string(v)
	end := 0
	dot := false
	for end < len(s) {
		c := s[end]
		if c == '.' && !dot {
			dot = true
		} else if c < '0' || c > '9' {
			break
		}
		end++
	}
	f, err := strconv.ParseFloat(s[:end], 64)
	if err != nil {
		return 0
	}
	return f
}

// destLen is the size of struct pingpong_dest in a peer of version v.
func (v Version) destLen() int {
	if v.number() >= tailMarkersVersion {
		return destLen629
	}
	return destLen606
}

// AppendVersion appends the 16-byte version message: the string, NUL
// padded (perftest copies it with strncpy).
func AppendVersion(b []byte, v Version) []byte {
	var m [versionLen]byte
	copy(m[:versionLen-1], v)
	return append(b, m[:]...)
}

// ParseVersion decodes a version message. The string ends at the first
// NUL, which perftest's 16 bytes always hold (it reserves 15 characters).
func ParseVersion(b []byte) (Version, error) {
	if len(b) != versionLen {
		return "", msgLenError("version", len(b), versionLen)
	}
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", fmt.Errorf("%w: version %q has no terminating NUL", ErrMessage, b)
	}
	b = b[:i]
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: version %q is not printable", ErrMessage, b)
		}
	}
	return Version(b), nil
}

// checkPeerVersion applies perftest's compatibility rule.
func checkPeerVersion(v Version) error {
	if v.number() < minPeerVersion {
		return fmt.Errorf("%w: peer version %q; perftest is not compatible with versions older than 5.70", ErrVersion, string(v))
	}
	return nil
}
