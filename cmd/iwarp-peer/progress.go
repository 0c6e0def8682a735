package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressDelay is how long a phase runs before it shows a progress line:
// short runs print nothing.
var progressDelay = time.Second

// progress keeps a one-line account of a long phase on a terminal. A nil
// *progress does nothing, so phases call it unconditionally.
type progress struct {
	w     io.Writer
	label string
	total int64         // messages, or 0 for a timed phase
	dur   time.Duration // the timed phase's length
	start time.Time
	done  atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
	shown bool
}

// startProgress starts the progress line of a phase of total messages (or
// of dur, if dur > 0) on w; a nil w shows nothing.
func startProgress(w io.Writer, label string, total int, dur time.Duration) *progress {
	if w == nil {
		return nil
	}
	p := &progress{w: w, label: label, total: int64(total), dur: dur, start: time.Now(), stop: make(chan struct{})}
	p.wg.Add(1)
	go p.run()
	return p
}

func (p *progress) add(n int64) {
	if p != nil {
		p.done.Add(n)
	}
}

func (p *progress) run() {
	defer p.wg.Done()
	t := time.NewTimer(progressDelay)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.print()
			t.Reset(500 * time.Millisecond)
		}
	}
}

func (p *progress) print() {
	elapsed := time.Since(p.start)
	n := p.done.Load()
	frac := 0.0
	if p.dur > 0 {
		frac = float64(elapsed) / float64(p.dur)
	} else if p.total > 0 {
		frac = float64(n) / float64(p.total)
	}
	fmt.Fprintf(p.w, "\r%s: %3.0f%%, %d messages, %.0f/s   ", p.label, min(frac, 1)*100, n, float64(n)/elapsed.Seconds())
	p.shown = true
}

// finish stops the line and clears it.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
