package iwtest

import (
	"fmt"
	"strings"

	"github.com/iwarp-go/iwarp-go/internal/units"
)

// The C program's list and keyword arguments, read as it reads them
// (interop/siw/cprog/iwtest.c), so that a command line works with both.

// ParseTests reads a -T list: test names or "all", separated by commas.
func ParseTests(list string) ([]Test, error) {
	var tests []Test
	for _, name := range strings.Split(list, ",") {
		if name == "all" {
			tests = append(tests, AllTests()...)
		} else if t, ok := ParseTest(name); ok {
			tests = append(tests, t)
		} else {
			return nil, fmt.Errorf("unknown test %s", name)
		}
	}
	return tests, nil
}

// ParseSizes reads a -S list: sizes from 1 to MaxSize with optional k or
// m suffixes, separated by commas.
func ParseSizes(list string) ([]uint32, error) {
	var sizes []uint32
	for _, part := range strings.Split(list, ",") {
		n, err := units.ParseSize(part, MaxSize)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("bad size %s (1..16m)", part)
		}
		sizes = append(sizes, uint32(n))
	}
	return sizes, nil
}

// ParseDirs reads -D: c2s, s2c or both.
func ParseDirs(s string) (int, error) {
	if d, ok := map[string]int{"c2s": C2S, "s2c": S2C, "both": Both}[s]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("--dirs %q: want c2s, s2c or both", s)
}

// ParseProvoke reads --provoke: access or bounds; "" provokes nothing.
func ParseProvoke(s string) (Provoke, error) {
	if p, ok := map[string]Provoke{"": 0, "access": ProvokeAccess, "bounds": ProvokeBounds}[s]; ok {
		return p, nil
	}
	return 0, fmt.Errorf("--provoke %q: want access or bounds", s)
}
