package perftest

import (
	"math/rand/v2"

	"github.com/iwarp-go/iwarp-go/conn"
)

// testBuffers are the registered memory of the test connections, one set
// per queue pair. Where perftest carves one buffer into halves, this side
// registers regions of their own, so that memory a work request sends is
// never memory a peer places into at the same time.
type testBuffers struct {
	// data is the message buffer: the source of Writes and Sends, the
	// sink of Reads, a server's Write target and Read source, a send_bw
	// server's receive buffer.
	data []*conn.MR
	// sink is where the peer's write_lat Writes land (watched).
	sink []*conn.MR
	// recv is a send_lat side's receive buffer.
	recv []*conn.MR
	// credit: a send_bw client's credit words, which the server writes
	// (watched, one 8-byte slot per queue pair); a send_bw server's
	// sources of those Writes (txDepth slots per queue pair).
	credit *conn.MR
	length int // of each data, sink and recv region
}

// creditSlot is the spacing of credit words: an 8-byte word holds each
// (perftest's are 4-byte words of a uint32 array), so that it can be read
// atomically.
const creditSlot = 8

// bufferLen is the size of a message buffer: BUFF_SIZE (the message size
// or the cycle buffer, whichever is larger), to a whole cache line.
func bufferLen(size, cycle, cacheLine int) int {
	n := max(size, cycle)
	return (n + cacheLine - 1) / cacheLine * cacheLine
}

func (s *session) setupBuffers() error {
	st := s.s
	b := &s.bufs
	b.length = bufferLen(st.size, s.proto.CycleBuffer(), s.proto.CacheLineSize())
	data := conn.LocalWrite
	switch st.Test {
	case WriteBW:
		data |= conn.RemoteWrite
	case ReadBW, ReadLat:
		// perftest adds remote write for Read tests over iWARP.
		data |= conn.RemoteRead | conn.RemoteWrite
	case AtomicBW, AtomicLat:
		data |= conn.RemoteAtomic
	}
	for range s.qps {
		buf := make([]byte, b.length)
		if st.Test != WriteLat {
			fill(buf)
		}
		mr, err := s.pd.Register(buf, data)
		if err != nil {
			return err
		}
		b.data = append(b.data, mr)
		switch st.Test {
		case WriteLat:
			mr, err := registerWatched(s.pd, make([]byte, b.length), conn.LocalWrite|conn.RemoteWrite)
			if err != nil {
				return err
			}
			b.sink = append(b.sink, mr)
		case SendLat:
			mr, err := s.pd.Register(make([]byte, b.length), conn.LocalWrite)
			if err != nil {
				return err
			}
			b.recv = append(b.recv, mr)
		}
	}
	if st.Test == SendBW {
		var err error
		if s.role == Client {
			b.credit, err = registerWatched(s.pd, make([]byte, creditSlot*len(s.qps)), conn.LocalWrite|conn.RemoteWrite)
		} else {
			b.credit, err = s.pd.Register(make([]byte, creditSlot*st.txDepth*len(s.qps)), conn.LocalWrite|conn.RemoteWrite)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// dest is what this side tells the peer about queue pair i: the region
// the peer writes to or reads from (in send_bw the credit word).
func (b *testBuffers) dest(i int, qp *conn.QP, st *settings) Dest {
	d := Dest{OutReads: uint32(st.outReads), QPN: qp.QPN(), PSN: psn()}
	var r conn.RemoteAddr
	switch st.Test {
	case SendBW:
		r = b.credit.Remote(i * creditSlot)
	case WriteLat:
		r = b.sink[i].Remote(0)
	default:
		r = b.data[i].Remote(0)
	}
	d.RKey, d.VAddr = uint32(r.STag), r.TO
	return d
}

func (b *testBuffers) release() {
	for _, l := range [][]*conn.MR{b.data, b.sink, b.recv} {
		for _, mr := range l {
			mr.Deregister()
		}
	}
	if b.credit != nil {
		b.credit.Deregister()
	}
	*b = testBuffers{}
}

// fill writes pseudo-random bytes, as perftest fills its buffers with
// rand().
func fill(b []byte) {
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
}
