package iwtest

import (
	"errors"
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// The report lines of PROTOCOL.md §8 ("KEY k=v …" on stdout) that need
// more than one printf.

// pdataLine formats the private data fields of iwtest's CONNECT,
// ESTABLISHED and REJECT lines.
func pdataLine(ird, ord int, pd []byte) string {
	h := "-"
	if len(pd) > 0 {
		h = fmt.Sprintf("%x", pd)
	}
	t := make([]byte, len(pd))
	for i, ch := range pd {
		if ch >= 0x20 && ch < 0x7f && ch != '"' {
			t[i] = ch
		} else {
			t[i] = '.'
		}
	}
	return fmt.Sprintf("ird=%d ord=%d private_data_len=%d private_data=%s text=\"%s\"", ird, ord, len(pd), h, t)
}

// readLimits are the IRD and ORD the queue pair works with, for the
// ESTABLISHED lines. With an RFC 6581 exchange conn reports them in
// Negotiated. Without one, Negotiated reports zeros and conn applies the
// values this session configured (conn.WithIRDORD's IRD, conn.WithPeerIRD
// as the ORD), which it has no accessor for.
func (s *session) readLimits(r *mpa.Result) (ird, ord int) {
	if r != nil && r.IRDORDKnown {
		return int(r.IRD), int(r.ORD)
	}
	return s.IRD, s.PeerIRD
}

// results aggregates phase results per test, size and direction over the
// iterations, as iwtest prints them.
type results struct {
	a          [2]agg
	ok, failed int
}

type agg struct {
	on     bool
	test   Test
	size   uint32
	iters  int
	status status
}

func (r *results) add(e *endpoint, ph *phase, st status) {
	x := &r.a[ph.dir]
	if x.on && (x.test != ph.test || x.size != ph.size) {
		r.flushAll(e)
	}
	if !x.on {
		*x = agg{on: true, test: ph.test, size: ph.size}
	}
	x.iters++
	if x.status == stOK {
		x.status = st
	}
}

func (r *results) flushAll(e *endpoint) {
	for d := range r.a {
		x := &r.a[d]
		if !x.on {
			continue
		}
		e.printf("RESULT role=%s test=%s dir=%s size=%d iters=%d status=%s\n", e.role(), x.test,
			dirName(uint8(d)), x.size, x.iters, x.status)
		if x.status == stOK {
			r.ok++
		} else {
			r.failed++
		}
		x.on = false
	}
}

// reportEnd prints how the connection ended, once it has: a Terminate
// received or sent (with the reading of its control field), and the
// cause.
func (e *endpoint) reportEnd() {
	if e.termRep {
		return
	}
	select {
	case <-e.qp.Done():
	default:
		return
	}
	e.termRep = true
	err := e.qp.Err()
	var te *rdmap.TerminateError
	if errors.As(err, &te) {
		e.printf("%s\n", terminateLine(e.role(), te))
	}
	event := "DISCONNECTED"
	switch {
	case te != nil:
		event = "TERMINATED"
	case errors.Is(err, conn.ErrConnectionLost):
		event = "CONNECTION_LOST"
	case errors.Is(err, conn.ErrQPClosed):
		event = "CLOSED"
	}
	e.printf("CONNECTION event=%s error=%q\n", event, fmt.Sprint(err))
}

// terminateLine describes a Terminate in one parseable line: where it
// came from, its code in the reading chosen, the layout of that reading
// (rfc, or siw for the little-endian bit-field order Linux siw sends) and
// the raw control field.
func terminateLine(role string, te *rdmap.TerminateError) string {
	origin, layout := "local", "rfc"
	m, d, r := te.Terminate.Flags()
	// What this side sends is in the RFC layout.
	w := rdmap.AppendTerminate(nil, &te.Terminate)[ddp.UntaggedHeaderLen:]
	control := fmt.Sprintf("%02x%02x%02x%02x", w[0], w[1], w[2], w[3])
	other := "-"
	if te.Remote {
		origin = "remote"
		if rt := te.Received; rt != nil {
			control = fmt.Sprintf("%02x%02x%02x%02x", rt.Control[0], rt.Control[1], rt.Control[2], rt.Control[3])
			rd := rt.Chosen()
			m, d, r = rd.M, rd.D, rd.R
			alt := rt.RFC
			if rt.Layout == rdmap.LayoutSIW {
				layout = "siw"
			} else {
				alt = rt.SIW
			}
			other = fmt.Sprintf("0x%04x", uint16(alt.Code))
		}
	}
	c := te.Code
	return fmt.Sprintf("TERMINATE role=%s origin=%s code=0x%04x layer=%d etype=%d ecode=0x%02x layout=%s control=%s m=%d d=%d r=%d other_reading=%s name=%q",
		role, origin, uint16(c), c.Layer(), c.EType(), c.ECode(), layout, control, b2i(m), b2i(d), b2i(r), other, c.String())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
