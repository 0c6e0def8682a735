// Package crashsim checks that a persistent-memory target tells the truth:
// that every byte covered by an acknowledged flush survives a crash, and
// that no acknowledgement goes out before the persist that covers it.
//
// A Shadow stands in for the persistence hardware (it implements
// pmemsink.Shadow): it keeps, per region byte, which write's bytes the
// working image holds and which the durable image holds, and moves bytes
// into the durable image only as msync (whole pages, EINVAL on an unaligned
// start) or cache-line write-back plus fence (whole lines, durable at the
// fence) would. A simulated power cut discards everything else.
//
// A Checker is told what the target does — each placed write, each flush
// received, each acknowledgement sent — and checks the two properties. Run
// drives a Target through randomized traces of writes, flushes of every
// kind and persists over several connections, cut at a random point.
// A test of the real network path uses the same Shadow and Checker with
// the connection engine's placement observer instead of Run.
//
// The package depends on nothing in this module, so pmemsink's own tests
// can use it.
package crashsim
