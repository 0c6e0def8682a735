// Package progress keeps a one-line account of a long phase on a terminal:
// a percentage, a message count and a rate, redrawn twice a second.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Delay is how long a phase runs before it shows a progress line: short
// runs print nothing.
var Delay = time.Second

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// Line is the progress line of one phase. A nil *Line does nothing, so
// phases call it unconditionally.
type Line struct {
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

// Start starts the progress line of a phase of total messages (or of dur,
// if dur > 0) on w; a nil w shows nothing and returns nil.
func Start(w io.Writer, label string, total int, dur time.Duration) *Line {
	if w == nil {
		return nil
	}
	p := &Line{w: w, label: label, total: int64(total), dur: dur, start: time.Now(), stop: make(chan struct{})}
	p.wg.Add(1)
	go p.run()
	return p
}

// Add counts n more messages.
func (p *Line) Add(n int64) {
	if p != nil {
		p.done.Add(n)
	}
}

func (p *Line) run() {
	defer p.wg.Done()
	t := time.NewTimer(Delay)
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

func (p *Line) print() {
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

// Finish stops the line and clears it.
func (p *Line) Finish() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
