package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIwtest_Usage(t *testing.T) {
	for _, args := range [][]string{
		{}, {"-s", "-c"}, {"-c"}, {"-s", "--expect-reject"}, {"-c", "-a", "x", "--reject"},
		{"-s", "-S", "0"}, {"-c", "-a", "x", "-T", "nope"}, {"-s", "--ird", "3"}, {"-s", "--crc", "maybe"},
		{"-s", "--mpa-rev", "3"}, {"-c", "-a", "x", "--mpa-rev", "1", "--p2p", "write"},
		{"-c", "-a", "x", "--mpa-rev", "1", "--no-enhanced"}, {"-s", "-D", "up"}, {"-s", "--provoke", "x"},
		{"-s", "-P", strings.Repeat("x", 252)}, {"-s", "-g", "7"}, {"-s", "extra"}, {"-c", "-a", "x", "-p", "0"},
		{"--print-pattern", "1,2,3"}, {"--print-pattern", "1,0,0,4097"},
	} {
		code, out, errb := runCmd(context.Background(), append([]string{"iwtest"}, args...)...)
		assert.Equal(t, 2, code, "%v: %s", args, errb)
		assert.NotEmpty(t, errb, "%v: says why", args)
		assert.Empty(t, out, "%v", args)
	}
}

// --print-pattern prints PROTOCOL.md §6's vectors, as the C program does.
func TestIwtest_PrintPattern(t *testing.T) {
	code, out, errb := runCmd(context.Background(), "iwtest", "--print-pattern", "3,1,2,13")
	require.Equal(t, 0, code, errb)
	require.Equal(t, "2ea232f8ab1a165f0883def6e5\n", out)
}

// -S takes sizes from 1 byte to 16 MiB with k and m suffixes; the flags
// are only parsed here (--print-pattern ends the command before it
// connects anywhere).
func TestIwtest_Sizes(t *testing.T) {
	for _, in := range []string{"1", "4k", "64K", "16m", "1M", "1,7,4096"} {
		code, _, errb := runCmd(context.Background(), "iwtest", "-S", in, "--print-pattern", "1,0,0,8")
		require.Equal(t, 0, code, "%s: %s", in, errb)
	}
	for _, in := range []string{"0", "16777217", "17m", "-1", "k", "4g", "", "1.5k"} {
		code, _, errb := runCmd(context.Background(), "iwtest", "-S", in, "--print-pattern", "1,0,0,8")
		require.Equal(t, 2, code, in)
		require.Contains(t, errb, "bad size", in)
	}
}
