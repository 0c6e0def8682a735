package bench

import (
	"fmt"
	"sync"
	"time"
)

// together runs n streams at once, from a common start each measures its
// time from: the phase moves what they all moved and lasts until the last
// of them ends. Each stream is set up before (not timed); a single one
// runs in the caller's goroutine.
func together(n int, run func(i int, start time.Time) (phaseResult, error)) (phaseResult, error) {
	if n == 1 {
		return run(0, time.Now())
	}
	res := make([]phaseResult, n)
	errs := make([]error, n)
	gate := make(chan struct{})
	var start time.Time
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			res[i], errs[i] = run(i, start)
		}()
	}
	start = time.Now()
	close(gate)
	wg.Wait()
	var sum phaseResult
	for i, r := range res {
		if errs[i] != nil {
			return phaseResult{}, fmt.Errorf("stream %d of %d: %w", i+1, n, errs[i])
		}
		sum.messages += r.messages
		sum.bytes += r.bytes
		sum.elapsed = max(sum.elapsed, r.elapsed)
	}
	return sum, nil
}

// timedTogether is together with the process's CPU time over the phase
// recorded in the result, when measure is set (a loopback run, whose
// process holds both ends of every stream).
func timedTogether(measure bool, n int, run func(i int, start time.Time) (phaseResult, error)) (phaseResult, error) {
	if !measure {
		return together(n, run)
	}
	m := startCPU()
	res, err := together(n, run)
	res.cpu, res.cpuOK = m.elapsed()
	return res, err
}
