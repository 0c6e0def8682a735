// Package testutil holds the helpers that tests of several packages share:
// hex dumps, a buffer safe to read while another goroutine writes it,
// allocation counting, the CPU time and context switches of a benchmark,
// parsing the flags a package registers for a command, external tools that
// CI requires, and the siw captures kept once in the repository.
//
// It is for _test.go files only; no library code imports it.
package testutil
