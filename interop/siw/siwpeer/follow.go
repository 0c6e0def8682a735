package siwpeer

import (
	"bytes"
	"io"
	"os"
	"time"
)

const followPoll = 50 * time.Millisecond

// follow copies what a guest job writes into the file path to w as it
// comes, whole lines at a time (so that the entry point's own lines never
// land inside one of the program's), until stop is closed; then it copies
// the rest and closes the returned channel.
func follow(path string, w io.Writer, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var f *os.File
		defer func() {
			if f != nil {
				f.Close()
			}
		}()
		var pending []byte
		buf := make([]byte, 64<<10)
		read := func() {
			if f == nil {
				var err error
				if f, err = os.Open(path); err != nil {
					return
				}
			}
			for {
				n, _ := f.Read(buf)
				if n == 0 {
					return
				}
				pending = append(pending, buf[:n]...)
			}
		}
		tick := time.NewTicker(followPoll)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				read()
				if len(pending) > 0 {
					_, _ = w.Write(pending)
				}
				return
			case <-tick.C:
			}
			read()
			if i := bytes.LastIndexByte(pending, '\n'); i >= 0 {
				_, _ = w.Write(pending[:i+1])
				pending = append(pending[:0], pending[i+1:]...)
			}
		}
	}()
	return done
}
