package capture

import (
	"net/netip"
	"slices"
	"sort"
)

// Conn is one TCP connection found in a capture.
type Conn struct {
	// Client sent the SYN; Server answered it. When the capture starts
	// after the handshake, Client is the source of the first segment seen.
	Client, Server netip.AddrPort
	// Up carries the bytes Client sent, Down the bytes Server sent.
	Up, Down *Stream
	// FirstFrame is the frame number of the connection's first segment.
	FirstFrame int
}

// Stream is one direction of a TCP connection, reassembled by sequence
// number.
type Stream struct {
	Src, Dst netip.AddrPort
	// SYN reports whether the SYN of this direction was captured; ISN is
	// its sequence number. Without a SYN the stream starts at the lowest
	// sequence number seen.
	SYN bool
	ISN uint32
	// FIN and RST report how the direction ended, if it did.
	FIN, RST bool
	// Data is the byte stream from the first data byte up to the first
	// hole. Retransmitted and overlapping bytes appear once, taken from
	// the earliest frame that carried them.
	Data []byte
	// Truncated reports that bytes after a hole in the sequence space
	// (lost or uncaptured segments) were dropped from Data.
	Truncated bool

	runs []run // frame that supplied each range of Data, by offset
}

// run says that Data[off:] up to the next run came from frame.
type run struct {
	off, frame int
}

// FrameAt returns the 1-based number of the frame that carried stream byte
// off, or 0 when off is outside Data.
func (s *Stream) FrameAt(off int) int {
	if off < 0 || off >= len(s.Data) {
		return 0
	}
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].off > off })
	return s.runs[i-1].frame
}

// connKey identifies a connection independent of direction.
type connKey struct {
	a, b netip.AddrPort
}

func keyOf(src, dst netip.AddrPort) connKey {
	if src.Addr().Less(dst.Addr()) || (src.Addr() == dst.Addr() && src.Port() < dst.Port()) {
		return connKey{src, dst}
	}
	return connKey{dst, src}
}

// dirState collects one direction's segments until the capture is read.
type dirState struct {
	src, dst netip.AddrPort
	syn      bool
	isn      uint32
	haveRef  bool
	ref      uint32 // reference for relative sequence numbers
	fin, rst bool
	segs     []segment
}

type connState struct {
	conn     *Conn
	up, down dirState
}

// assembler groups segments into connections.
type assembler struct {
	open  map[connKey]*connState
	conns []*connState
}

func (a *assembler) add(s segment) {
	if a.open == nil {
		a.open = make(map[connKey]*connState)
	}
	k := keyOf(s.src, s.dst)
	cs := a.open[k]
	// A fresh SYN with a new ISN on a known 4-tuple starts a new
	// connection (port reuse); a retransmitted SYN does not.
	if cs != nil && s.syn && !s.ack {
		if d := cs.dir(s.src); !d.syn || d.isn != s.seq {
			if d.syn || len(d.segs) > 0 {
				cs = nil
			}
		}
	}
	if cs == nil {
		cs = &connState{conn: &Conn{Client: s.src, Server: s.dst, FirstFrame: s.frame}}
		if s.syn && s.ack {
			// The capture missed the SYN; the SYN-ACK sender is the server.
			cs.conn.Client, cs.conn.Server = s.dst, s.src
		}
		cs.up = dirState{src: cs.conn.Client, dst: cs.conn.Server}
		cs.down = dirState{src: cs.conn.Server, dst: cs.conn.Client}
		a.open[k] = cs
		a.conns = append(a.conns, cs)
	}
	d := cs.dir(s.src)
	if s.syn {
		d.syn, d.isn = true, s.seq
		d.haveRef, d.ref = true, s.seq+1
	}
	if !d.haveRef {
		d.haveRef, d.ref = true, s.seq
	}
	if s.rst {
		d.rst = true
	}
	if s.fin {
		d.fin = true
	}
	if len(s.payload) > 0 {
		d.segs = append(d.segs, s)
	}
}

func (cs *connState) dir(src netip.AddrPort) *dirState {
	if src == cs.up.src {
		return &cs.up
	}
	return &cs.down
}

func (a *assembler) finish() []*Conn {
	out := make([]*Conn, 0, len(a.conns))
	for _, cs := range a.conns {
		cs.conn.Up = cs.up.assemble()
		cs.conn.Down = cs.down.assemble()
		out = append(out, cs.conn)
	}
	return out
}

// chunk is a range of stream offsets filled from one frame.
type chunk struct {
	off, end int64
	frame    int
	data     []byte
}

// assemble places segments in frame order so that the earliest copy of a
// byte wins, then concatenates the contiguous prefix.
func (d *dirState) assemble() *Stream {
	st := &Stream{Src: d.src, Dst: d.dst, SYN: d.syn, ISN: d.isn, FIN: d.fin, RST: d.rst}
	var chunks []chunk // sorted by off, non-overlapping
	for _, s := range d.segs {
		// Without a SYN the reference may be later than a segment that
		// arrived out of order, hence the signed difference.
		off := int64(int32(s.seq - d.ref))
		if d.syn {
			off = int64(s.seq - d.ref)
		}
		chunks = insertUncovered(chunks, off, off+int64(len(s.payload)), s.frame, s.payload)
	}
	if len(chunks) == 0 {
		return st
	}
	base := int64(0)
	if !d.syn {
		base = chunks[0].off
	}
	next := base
	for _, c := range chunks {
		if c.off != next {
			// Chunks never overlap, so this is a hole.
			st.Truncated = true
			break
		}
		pos := int(c.off - base)
		if n := len(st.runs); n == 0 || st.runs[n-1].frame != c.frame {
			st.runs = append(st.runs, run{off: pos, frame: c.frame})
		}
		st.Data = append(st.Data, c.data...)
		next = c.end
	}
	return st
}

// insertUncovered adds the parts of [off,end) that no chunk covers yet,
// keeping chunks sorted. In-order segments (the common case) append in
// constant time; others find their place by binary search, so a capture
// of many segments reassembles in about n log n, not n².
func insertUncovered(chunks []chunk, off, end int64, frame int, data []byte) []chunk {
	if off >= end {
		return chunks
	}
	if n := len(chunks); n == 0 || off >= chunks[n-1].end {
		return append(chunks, chunk{off: off, end: end, frame: frame, data: data})
	}
	// The first chunk that ends after off; everything before it is
	// entirely below the new range.
	i := sort.Search(len(chunks), func(i int) bool { return chunks[i].end > off })
	cur := off
	for i < len(chunks) && cur < end {
		c := chunks[i]
		if c.off >= end {
			break
		}
		if c.off > cur {
			chunks = slices.Insert(chunks, i, chunk{off: cur, end: c.off, frame: frame, data: data[cur-off : c.off-off]})
			i++
		}
		cur = max(cur, c.end)
		i++
	}
	if cur < end {
		chunks = slices.Insert(chunks, i, chunk{off: cur, end: end, frame: frame, data: data[cur-off:]})
	}
	return chunks
}
