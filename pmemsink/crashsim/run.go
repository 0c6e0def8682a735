package crashsim

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
)

// Target is the system under test as Run drives it: the target side of a
// connection engine reduced to what matters for durability.
type Target interface {
	// Write places data at region offset off for connection conn, as the
	// engine places an RDMA Write, and records it as the engine's
	// placement observer would.
	Write(conn int, off uint64, data []byte)
	// Flush is called when a flush of kind k (range [off, off+n) for the
	// ranged kinds) arrives on conn, after conn's earlier writes. It
	// returns the persist the engine would run before acknowledging, or
	// nil if nothing needs persisting (a Read on a clean connection).
	Flush(conn int, k Kind, off, n uint64) (persist func() error)
}

// Config shapes the traces of Run.
type Config struct {
	Conns int
	// Ops is the most steps a trace takes before the cut; the cut falls
	// at a uniformly random step in [1, Ops].
	Ops int
	// MaxWrite is the longest write, in bytes.
	MaxWrite int
	// AckBeforePersist makes the driver acknowledge each flush as it
	// arrives and persist it later: a defect the checker must catch.
	AckBeforePersist bool
}

// Result summarises one trace.
type Result struct {
	Steps, Writes, Flushes, Acks, Failed int
}

type pending struct {
	id      FlushID
	persist func() error
	done    bool
	err     error
	acked   bool
}

// Run drives tgt through one random trace over sh and returns what the
// checker found. Each step places a write, delivers a flush, runs the
// oldest persist not yet run of one connection (persists of a connection
// run in order, concurrently with everything else), or sends the oldest
// acknowledgement of one connection whose persist has finished
// (acknowledgements of a connection go in order, as Read Responses and
// Flush Responses do). A flush whose persist failed is never
// acknowledged. At the cut, whatever was not persisted is lost.
func Run(rng *rand.Rand, cfg Config, sh *Shadow, tgt Target) (Result, error) {
	chk := NewChecker(sh, cfg.Conns)
	size := uint64(sh.Size())
	queues := make([][]*pending, cfg.Conns)
	var res Result
	cut := 1 + rng.IntN(max(cfg.Ops, 1))
	buf := make([]byte, cfg.MaxWrite)
	for res.Steps = 0; res.Steps < cut; res.Steps++ {
		c := rng.IntN(cfg.Conns)
		switch r := rng.IntN(100); {
		case r < 50:
			off, n := randomRange(rng, size, uint64(cfg.MaxWrite), sh.page, sh.line)
			data := buf[:n]
			fill(rng, data)
			tgt.Write(c, off, data)
			chk.Write(c, off, n)
			res.Writes++
		case r < 70:
			k := Kind(1 + rng.IntN(4))
			var off, n uint64
			if k.Ranged() {
				off, n = randomRange(rng, size, size, sh.page, sh.line)
			}
			id := chk.Flush(c, k, off, n)
			p := &pending{id: id, persist: tgt.Flush(c, k, off, n)}
			if p.persist == nil {
				p.done = true
			}
			if cfg.AckBeforePersist {
				chk.Ack(id)
				p.acked = true
			}
			queues[c] = append(queues[c], p)
			res.Flushes++
		case r < 85:
			for _, p := range queues[c] {
				if !p.done {
					p.err, p.done = p.persist(), true
					if p.err != nil {
						res.Failed++
					}
					break
				}
			}
		default:
			q := queues[c]
			if len(q) == 0 || !q[0].done {
				continue
			}
			if q[0].err == nil && !q[0].acked {
				chk.Ack(q[0].id)
				res.Acks++
			}
			queues[c] = q[1:]
		}
	}
	return res, errors.Join(chk.Err(), chk.Cut())
}

func fill(rng *rand.Rand, b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, rng.Uint64())
		b = b[8:]
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// randomRange picks a range of at most maxLen bytes inside [0, size),
// often starting or ending near page and line boundaries, where rounding
// mistakes show.
func randomRange(rng *rand.Rand, size, maxLen, page, line uint64) (uint64, uint64) {
	n := 1 + rng.Uint64N(max(min(maxLen, size), 1))
	var off uint64
	switch rng.IntN(4) {
	case 0:
		off = rng.Uint64N(size)
	case 1: // around a page boundary
		off = rng.Uint64N(size/page+1)*page + rng.Uint64N(2*line) - line
	case 2: // around a line boundary
		off = rng.Uint64N(size/line+1)*line + rng.Uint64N(8) - 4
	default: // an 8-byte word, as librpma's atomic write
		off, n = rng.Uint64N(size/8)*8, 8
	}
	if off >= size { // also catches the wrap-around below zero
		off = rng.Uint64N(size)
	}
	return off, min(n, size-off)
}
