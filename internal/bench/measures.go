package bench

// The decidable measures of a latency phase (issue 25): the CPU time both
// endpoints spent per round trip, iwarp-go's against raw TCP's of the same
// run, and the share of round trips slowed past twice the median against
// raw TCP's. CPU time does not count the time the host stole a core, and
// a share of slowed round trips is a count, not one sample, so both ratios
// hold still on a loaded machine where the wall-clock median and the p99
// ratio flip between sittings.

// fillMeasures sets r's CPU per operation and its ratios from the figures
// a run measured. Between processes (loopback false) both endpoints' CPU
// is the client's plus the server's, each per its own round trips; without
// the server's report there is no figure for both, and none is given.
func fillMeasures(r *Result, loopback bool) {
	r.CPUnsPerOp = bothEndsNs(r.LatCPUus, r.ServerLatCPUus, loopback)
	if r.TCPLatCPUus != nil {
		r.TCPCPUnsPerOp = ptr(*r.TCPLatCPUus * 1000)
	}
	r.CPURatio = quotient(r.CPUnsPerOp, r.TCPCPUnsPerOp)
	if r.LatIters > 0 && r.TCPLatSlowPct != nil {
		r.LatSlowRatio = shareRatio(r.LatSlowPct, *r.TCPLatSlowPct)
	}
}

// bothEndsNs is the CPU time of both endpoints per round trip, in
// nanoseconds, from the client's figure (which in one process holds both)
// and the server's.
func bothEndsNs(client, server *float64, oneProcess bool) *float64 {
	switch {
	case client == nil:
		return nil
	case oneProcess:
		return ptr(*client * 1000)
	case server == nil:
		return nil
	}
	return ptr((*client + *server) * 1000)
}

// quotient is a / b, or nil if either is missing or b is not positive.
func quotient(a, b *float64) *float64 {
	if a == nil || b == nil || *b <= 0 {
		return nil
	}
	return ptr(*a / *b)
}

// shareRatio is the ratio of two shares of slowed round trips. Where raw
// TCP had none, it is 1 if iwarp-go had none either (the same share) and
// undecided (nil) otherwise: no factor relates a share to zero.
func shareRatio(ours, theirs float64) *float64 {
	switch {
	case theirs > 0:
		return ptr(ours / theirs)
	case ours == 0:
		return ptr(1)
	}
	return nil
}
