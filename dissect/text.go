package dissect

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteJSON writes d as one indented JSON document.
func (d *Dissection) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// WriteText writes d in a readable form: per stream, the connection, each
// direction's negotiated options, the MPA frames and the FPDUs in capture
// order, then the notes; last, where a file cut short stops.
func (d *Dissection) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if len(d.Streams) == 0 {
		fmt.Fprintln(bw, "no TCP connections in the capture")
	}
	for i, s := range d.Streams {
		if i > 0 {
			fmt.Fprintln(bw)
		}
		s.writeText(bw)
	}
	if d.Cut != nil {
		fmt.Fprintf(bw, "\n%s\n", d.Cut)
	}
	return bw.Flush()
}

func (s *Stream) writeText(w *bufio.Writer) {
	fmt.Fprintf(w, "stream %d: %v → %v", s.Index, s.Client, s.Server)
	if s.FirstFrame > 0 {
		fmt.Fprintf(w, ", first frame %d", s.FirstFrame)
	}
	fmt.Fprintf(w, ": %v\n", s.State)
	for d, dd := range s.Directions {
		fmt.Fprintf(w, "  %-4v %v → %v: %d octets", Dir(d), dd.Src, dd.Dst, dd.Bytes)
		if s.State == StateEstablished {
			fmt.Fprintf(w, ", %d FPDUs, CRC %s, markers %s", dd.FPDUs, onOff(dd.CRC), onOff(dd.Markers))
		}
		var flags []string
		for _, f := range []struct {
			set  bool
			name string
		}{{dd.SYN, "SYN"}, {dd.FIN, "FIN"}, {dd.RST, "RST"}, {dd.Hole, "hole"}} {
			if f.set {
				flags = append(flags, f.name)
			}
		}
		if len(flags) > 0 {
			fmt.Fprintf(w, " [%s]", strings.Join(flags, " "))
		}
		fmt.Fprintln(w)
	}
	for _, h := range []*Handshake{s.Request, s.Reply} {
		if h != nil {
			fmt.Fprintf(w, "  %-16s %-4v %s\n", frameLabel(h.Frames), h.Dir, h.text())
		}
	}
	for _, f := range s.PDUs {
		fmt.Fprintf(w, "  %-16s %-4v %s\n", frameLabel(f.Frames), f.Dir, f.text())
		if t := f.Terminate; t != nil {
			fmt.Fprintf(w, "  %-16s      %s\n", "", t.text())
		}
		if f.Error != "" {
			fmt.Fprintf(w, "  %-16s      error: %s\n", "", f.Error)
		}
	}
	for _, n := range s.Notes {
		fmt.Fprintf(w, "  note (%v", n.Dir)
		if n.Frame > 0 {
			fmt.Fprintf(w, ", frame %d", n.Frame)
		}
		fmt.Fprintf(w, ", offset %d): %s\n", n.Offset, n.Text)
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func frameLabel(fr []int) string {
	switch len(fr) {
	case 0:
		return "-"
	case 1:
		return "frame " + strconv.Itoa(fr[0])
	}
	consecutive := true
	parts := make([]string, len(fr))
	for i, f := range fr {
		parts[i] = strconv.Itoa(f)
		consecutive = consecutive && (i == 0 || f == fr[i-1]+1)
	}
	if consecutive {
		return "frames " + parts[0] + "-" + parts[len(parts)-1]
	}
	return "frames " + strings.Join(parts, ",")
}

func (h *Handshake) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "MPA %s rev %d flags 0x%02x", strings.ToUpper(h.Kind[:1])+h.Kind[1:], h.Rev, uint8(h.Flags))
	var bits []string
	for _, f := range []struct {
		set  bool
		name string
	}{{h.M, "M"}, {h.C, "C"}, {h.R, "R"}, {h.Enhanced, "enhanced"}} {
		if f.set {
			bits = append(bits, f.name)
		}
	}
	if len(bits) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(bits, " "))
	}
	fmt.Fprintf(&b, " PD_Length %d", h.PDLength)
	if v := h.IRDORD; v != nil {
		fmt.Fprintf(&b, " IRD %d ORD %d", v.IRD, v.ORD)
		if v.P2P {
			b.WriteString(" P2P")
		}
		if v.RTR != "" {
			fmt.Fprintf(&b, " RTR %s", v.RTR)
		}
	}
	if len(h.PrivateData) > 0 {
		fmt.Fprintf(&b, " private data %s", hex.EncodeToString(h.PrivateData))
	}
	if h.Error != "" {
		fmt.Fprintf(&b, " — refused: %s", h.Error)
	}
	return b.String()
}

func (f *FPDU) text() string {
	var b strings.Builder
	b.WriteString(f.Op)
	if f.Op == "" {
		b.WriteString("(empty ULPDU)")
	}
	if f.Last {
		b.WriteString(" L")
	}
	if f.STag != nil {
		fmt.Fprintf(&b, " STag 0x%08x TO 0x%x", uint32(*f.STag), uint64(*f.TO))
	}
	if f.QN != nil {
		fmt.Fprintf(&b, " QN %d MSN %d MO %d", *f.QN, *f.MSN, *f.MO)
	}
	if f.InvalidateSTag != nil {
		fmt.Fprintf(&b, " invalidate 0x%08x", uint32(*f.InvalidateSTag))
	}
	if rr := f.ReadRequest; rr != nil {
		fmt.Fprintf(&b, " sink 0x%08x@0x%x size %d source 0x%08x@0x%x",
			uint32(rr.SinkSTag), uint64(rr.SinkTO), rr.Size, uint32(rr.SrcSTag), uint64(rr.SrcTO))
	}
	if a := f.AtomicRequest; a != nil {
		fmt.Fprintf(&b, " %s id %d target 0x%08x@0x%x add/swap 0x%x mask 0x%x compare 0x%x mask 0x%x",
			a.Op, a.ID, uint32(a.STag), uint64(a.TO), uint64(a.AddSwap), uint64(a.AddSwapMask), uint64(a.Compare), uint64(a.CompareMask))
	}
	if a := f.AtomicResponse; a != nil {
		fmt.Fprintf(&b, " id %d original 0x%x", a.ID, uint64(a.Orig))
	}
	if v := f.Immediate; v != nil {
		fmt.Fprintf(&b, " immediate 0x%x", uint64(*v))
	}
	fmt.Fprintf(&b, " · ULPDU %d", f.ULPDULength)
	if f.PayloadLen > 0 {
		fmt.Fprintf(&b, ", payload %d", f.PayloadLen)
	}
	if f.Markers > 0 {
		fmt.Fprintf(&b, ", %d markers", f.Markers)
	}
	fmt.Fprintf(&b, " · CRC %v", f.CRC)
	if f.CRC == CRCBad {
		fmt.Fprintf(&b, " (field %s, computed %s)", hex.EncodeToString(f.CRCField), hex.EncodeToString(f.CRCComputed))
	}
	if f.Truncated {
		b.WriteString(" · truncated")
	}
	return b.String()
}

func (t *Terminate) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "control % x: RFC reading %s%s; siw reading %s%s; chosen: %s",
		[]byte(t.Control), t.RFC.Name, mdr(t.RFC), t.SIW.Name, mdr(t.SIW), t.Layout)
	if t.SegmentLen != nil {
		fmt.Fprintf(&b, "; DDP segment length %d", *t.SegmentLen)
	}
	if len(t.DDPHeader) > 0 {
		fmt.Fprintf(&b, "; DDP header %s", hex.EncodeToString(t.DDPHeader))
	}
	if len(t.RDMAHeader) > 0 {
		fmt.Fprintf(&b, "; RDMA header %s", hex.EncodeToString(t.RDMAHeader))
	}
	if len(t.Trailing) > 0 {
		fmt.Fprintf(&b, "; %d trailing octets", len(t.Trailing))
	}
	if !t.Conforming {
		b.WriteString("; not QN 2/MSN 1/MO 0 with L")
	}
	return b.String()
}

func mdr(r Reading) string {
	var s string
	for _, f := range []struct {
		set  bool
		name string
	}{{r.M, "M"}, {r.D, "D"}, {r.R, "R"}} {
		if f.set {
			s += f.name
		}
	}
	if s == "" {
		return ""
	}
	return " [" + s + "]"
}
