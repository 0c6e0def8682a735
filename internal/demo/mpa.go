package demo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// MPA walks through the MPA layer at work on loopback TCP, explaining
// each step on out: connection setup, FPDUs with CRC32c, markers, a
// corrupted FPDU and a rejected Request. The ULPDUs carry DDP-shaped
// headers but nothing interprets them: this is MPA (package mpa) alone.
func MPA(ctx context.Context, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	d := &mpaDemo{out: out, ln: ln}

	fmt.Fprintln(out, "iwarp-peer demo: MPA (RFC 5044, RFC 6581 setup) between two endpoints in this process, over loopback TCP")
	for _, step := range []func(context.Context) error{d.basics, d.markers, d.reject} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

type mpaDemo struct {
	out io.Writer
	ln  net.Listener
}

func (d *mpaDemo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

// pair is one demo connection after MPA setup.
type mpaPair struct {
	ini, resp       net.Conn
	iniRes, respRes *mpa.Result
}

func (p *mpaPair) close() {
	p.ini.Close()
	p.resp.Close()
}

// connect dials the listener and runs setup on both ends; decide sees the
// Request on the responder side and returns the Reply's private data, or
// an error to reject with that error's text as private data.
func (d *mpaDemo) connect(ctx context.Context, ini, resp *mpa.Config, iniPD []byte,
	decide func(*mpa.Request) ([]byte, error)) (*mpaPair, error) {
	type accepted struct {
		c   net.Conn
		res *mpa.Result
		err error
	}
	ach := make(chan accepted, 1)
	go func() {
		c, err := d.ln.Accept()
		if err != nil {
			ach <- accepted{err: err}
			return
		}
		req, err := mpa.ReadRequest(ctx, c, resp)
		if err != nil {
			ach <- accepted{c: c, err: err}
			return
		}
		pd, why := decide(req)
		if why != nil {
			ach <- accepted{c: c, err: errors.Join(why, req.Reject(ctx, []byte(why.Error())))}
			return
		}
		res, err := req.Accept(ctx, pd)
		ach <- accepted{c: c, res: res, err: err}
	}()
	if req, err := mpa.BuildRequest(ini, iniPD); err == nil {
		d.say("   initiator → %s", &req)
	}
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", d.ln.Addr().String())
	if err != nil {
		return nil, err
	}
	res, ierr := mpa.Connect(ctx, c, ini, iniPD)
	a := <-ach
	p := &mpaPair{ini: c, resp: a.c, iniRes: res, respRes: a.res}
	if ierr != nil || a.err != nil {
		if a.c != nil {
			a.c.Close()
		}
		c.Close()
		return p, errors.Join(ierr, a.err)
	}
	return p, nil
}

func (d *mpaDemo) basics(ctx context.Context) error {
	d.say("")
	d.say("1. Connection setup")
	ini := &mpa.Config{IRD: 4, ORD: 8, CRC: mpa.CRCRequired}
	resp := &mpa.Config{IRD: 16, ORD: 2}
	p, err := d.connect(ctx, ini, resp, []byte("hello from the initiator"), func(r *mpa.Request) ([]byte, error) {
		d.say("   responder ← %s", &r.Frame)
		d.say("   responder: private data looks fine, accepting")
		return []byte("welcome"), nil
	})
	if err != nil {
		return err
	}
	defer p.close()
	d.say("   responder → %s", &p.respRes.Reply)
	ir, rr := p.iniRes, p.respRes
	d.say("   settled: CRC32c %s, markers off both ways, revision %d", onOff(ir.CRC && rr.CRC), ir.Revision)
	d.say("   settled: initiator may have %d RDMA Reads outstanding (min of its ORD %d and the responder's IRD %d),",
		ir.ORD, ini.ORD, ir.PeerIRD)
	d.say("            responder %d (min of its ORD %d and the initiator's IRD %d)", rr.ORD, resp.ORD, rr.PeerIRD)
	d.say("   responder must wait for the initiator's first FPDU before sending: %v", rr.WaitForPeerFPDU)

	d.say("")
	d.say("2. FPDUs with CRC32c (three FPDUs queued, sent with one writev)")
	w := mpa.NewWriter(p.ini, mpa.WriterConfig{CRC: ir.CRC})
	sizes := []int{64, 4096, 0}
	for i, n := range sizes {
		hdr := taggedHeader(uint32(0x100+i), uint64(i)*4096)
		if err := w.WriteFPDU(hdr, bytes.Repeat([]byte{byte('a' + i)}, n)); err != nil {
			return err
		}
		u := len(hdr) + n
		d.say("   initiator queues FPDU %d: ULPDU %d = 14-byte tagged header + %d-byte payload; %d bytes on the wire (pad %d, CRC 4)",
			i+1, u, n, mpa.FPDULen(u), mpa.FPDULen(u)-2-u-4)
	}
	d.say("   initiator flushes %d bytes", w.Buffered())
	if err := w.Flush(); err != nil {
		return err
	}
	r := mpa.NewReader(p.resp, mpa.ReaderConfig{CRC: rr.CRC})
	dst := make([]byte, 8192)
	for i := range sizes {
		n, err := r.Next()
		if err != nil {
			return err
		}
		h, err := r.Peek(14)
		if err != nil {
			return err
		}
		stag := binary.BigEndian.Uint32(h[2:6])
		if err := r.Discard(14); err != nil {
			return err
		}
		payload := dst[:n-14]
		if err := r.ReadFull(payload); err != nil {
			return err
		}
		if err := r.End(); err != nil {
			return err
		}
		d.say("   responder ← FPDU %d: ULPDU %d, header STag 0x%x, %d payload bytes placed in its buffer, CRC ok", i+1, n, stag, len(payload))
	}
	// The initiator has sent, so the responder may answer.
	rw := mpa.NewWriter(p.resp, mpa.WriterConfig{CRC: rr.CRC})
	if err := rw.WriteFPDU([]byte{0x41, 0x43}, []byte("thanks")); err != nil {
		return err
	}
	if err := rw.Flush(); err != nil {
		return err
	}
	ir2 := mpa.NewReader(p.ini, mpa.ReaderConfig{CRC: ir.CRC})
	u, err := ir2.ReadFPDU(dst)
	if err != nil {
		return err
	}
	d.say("   responder → FPDU: ULPDU %d; initiator ← %q, CRC ok", len(u), u[2:])

	// A damaged FPDU: frame it on the side, flip one payload bit, send raw.
	var raw bytes.Buffer
	bw := mpa.NewWriter(&raw, mpa.WriterConfig{CRC: true})
	if err := bw.WriteFPDU(taggedHeader(0x200, 0), []byte("precious data")); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	b := raw.Bytes()
	b[20] ^= 0x01
	if _, err := p.ini.Write(b); err != nil {
		return err
	}
	_, err = r.ReadFPDU(dst)
	var tc termcode.Code
	if !errors.Is(err, mpa.ErrCRC) || !errors.As(err, &tc) {
		return fmt.Errorf("corrupted FPDU not caught: %v", err)
	}
	d.say("   initiator → an FPDU with one payload bit flipped in transit")
	d.say("   responder ← CRC mismatch: it would send a Terminate with code 0x%04x (layer LLP, type MPA, CRC error) and close", uint16(tc))
	return nil
}

func (d *mpaDemo) markers(ctx context.Context) error {
	d.say("")
	d.say("3. Markers (RFC 5044 §4.3), asked for by both sides")
	cfg := func() *mpa.Config { return &mpa.Config{RequestMarkers: true, IRD: 1, ORD: 1} }
	p, err := d.connect(ctx, cfg(), cfg(), nil, func(*mpa.Request) ([]byte, error) { return nil, nil })
	if err != nil {
		return err
	}
	defer p.close()
	ir, rr := p.iniRes, p.respRes
	if !(ir.SendMarkers && ir.RecvMarkers && rr.SendMarkers && rr.RecvMarkers) {
		return fmt.Errorf("markers not settled both ways: %+v / %+v", ir, rr)
	}
	d.say("   settled: each side inserts markers into the stream it sends, every 512 octets")
	w := mpa.NewWriter(p.ini, mpa.WriterConfig{CRC: ir.CRC, Markers: ir.SendMarkers})
	payload := bytes.Repeat([]byte("0123456789abcdef"), 80) // 1280 bytes
	if err := w.WriteFPDU(taggedHeader(0x300, 0), payload); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	wire := w.StreamOffset()
	d.say("   initiator → FPDU with a %d-byte payload: %d bytes on the wire, %d of them markers at stream offsets 0, 512 and 1024",
		len(payload), wire, wire-int64(mpa.FPDULen(14+len(payload))))
	r := mpa.NewReader(p.resp, mpa.ReaderConfig{CRC: rr.CRC, Markers: rr.RecvMarkers})
	n, err := r.Next()
	if err != nil {
		return err
	}
	got := make([]byte, n)
	if err := r.ReadFull(got); err != nil {
		return err
	}
	if err := r.End(); err != nil {
		return err
	}
	d.say("   responder ← ULPDU %d, markers removed and their FPDU pointers checked, payload intact %v, CRC (over the markers too) ok",
		n, bytes.Equal(got[14:], payload))
	return nil
}

func (d *mpaDemo) reject(ctx context.Context) error {
	d.say("")
	d.say("4. A rejected Request")
	_, err := d.connect(ctx, &mpa.Config{}, &mpa.Config{}, []byte("may I?"), func(r *mpa.Request) ([]byte, error) {
		d.say("   responder ← Request with private data %q", r.Frame.PrivateData)
		return nil, errors.New("not today")
	})
	var re *mpa.RejectedError
	if !errors.As(err, &re) {
		return fmt.Errorf("expected a reject, got %v", err)
	}
	d.say("   responder → %s", &re.Reply)
	d.say("   initiator: connection refused by the peer, private data %q", re.PrivateData)
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// taggedHeader is a DDP tagged header for an RDMA Write (last segment).
func taggedHeader(stag uint32, to uint64) []byte {
	h := []byte{0xc1, 0x40}
	h = binary.BigEndian.AppendUint32(h, stag)
	return binary.BigEndian.AppendUint64(h, to)
}
