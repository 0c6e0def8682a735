package perftest

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a message size as perftest's -s takes it: a C integer
// (decimal, 0x hex or 0 octal) with an optional K or M suffix, from 1 to
// MaxMessageSize. The error is perftest's message.
func ParseSize(s string) (int, error) {
	mul := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1024, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mul, s = 1024*1024, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 0, 32)
	if err != nil || n*mul < 1 || n*mul > MaxMessageSize {
		return 0, fmt.Errorf("message size should be between 1 and %d", MaxMessageSize)
	}
	return int(n * mul), nil
}
