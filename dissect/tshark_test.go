package dissect_test

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/gopacket/pcapgo"
	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/dissect/tsharktest"
	"github.com/stretchr/testify/require"
)

// record is one PDU reduced to the fields both decoders report, rendered
// the way tshark shows them.
type record struct {
	frame, stream, port int
	fields              map[string]string
}

func (r record) String() string {
	keys := make([]string, 0, len(r.fields))
	for k := range r.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "frame %d stream %d port %d:", r.frame, r.stream, r.port)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, r.fields[k])
	}
	return b.String()
}

// compared are the tshark fields this comparison covers; a field in the
// list that one side has and the other lacks is a mismatch.
var compared = []string{
	"iwarp_mpa.key.req", "iwarp_mpa.key.rep", "iwarp_mpa.marker_flag", "iwarp_mpa.crc_flag",
	"iwarp_mpa.rej_flag", "iwarp_mpa.res", "iwarp_mpa.rev", "iwarp_mpa.pdlength",
	"iwarp_mpa.privatedata", "iwarp_mpa.ulpdulength", "iwarp_mpa.pad", "iwarp_mpa.crc",
	"iwarp_mpa.crc_check",
	"iwarp_ddp.tagged_flag", "iwarp_ddp.last_flag", "iwarp_ddp.dv", "iwarp_ddp.stag",
	"iwarp_ddp.tagged_offset", "iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.mo",
	"iwarp_rdma.version", "iwarp_rdma.opcode", "iwarp_rdma.inval_stag",
	"iwarp_rdma.sinkstag", "iwarp_rdma.sinkto", "iwarp_rdma.rdmardsz", "iwarp_rdma.srcstag",
	"iwarp_rdma.srcto", "iwarp_rdma.terminate",
	// RFC 7306 (tshark decodes the atomics, not Immediate Data).
	"iwarp_rdma.atomic.opcode", "iwarp_rdma.atomic.request_identifier", "iwarp_rdma.atomic.remote_stag",
	"iwarp_rdma.atomic.remote_tagged_offset", "iwarp_rdma.atomic.add_data", "iwarp_rdma.atomic.add_mask",
	"iwarp_rdma.atomic.swap_data", "iwarp_rdma.atomic.swap_mask", "iwarp_rdma.atomic.compare_data",
	"iwarp_rdma.atomic.compare_mask", "iwarp_rdma.atomic.original_request_identifier",
	"iwarp_rdma.atomic.original_remote_data_value",
}

// tsharkRecords renders tshark's PDUs. Byte fields compare by their octets,
// the CRC by its value and verdict, the pad by its length, and a Terminate
// by the octets it covers in the frame (tshark reads the control field in
// RFC layout only, so its decoded fields are not compared).
func tsharkRecords(t *testing.T, file string) []record {
	frames := readFrames(t, file)
	var out []record
	for _, p := range tsharktest.PDUs(t, file) {
		r := record{frame: p.Frame, stream: p.Stream, port: p.SrcPort, fields: map[string]string{}}
		all := map[string]tsharktest.Field{}
		for k, v := range p.MPA {
			all[k] = v
		}
		for k, v := range p.DDP {
			all[k] = v
		}
		for _, k := range compared {
			f, ok := all[k]
			if !ok {
				continue
			}
			switch k {
			case "iwarp_mpa.key.req", "iwarp_mpa.key.rep", "iwarp_mpa.privatedata":
				r.fields[k] = f.Value
			case "iwarp_mpa.pad":
				r.fields[k] = fmt.Sprint(f.Size)
			case "iwarp_mpa.crc_check":
				verdict := "?"
				switch {
				case strings.Contains(f.ShowName, "(Good CRC32)"):
					verdict = "good"
				case strings.Contains(f.ShowName, "Bad CRC32, should be "):
					i := strings.Index(f.ShowName, "should be ")
					verdict = "bad, should be " + strings.TrimSuffix(f.ShowName[i+len("should be "):], ")")
				}
				r.fields[k] = f.Show + " " + verdict
			case "iwarp_rdma.terminate":
				fr := frames[p.Frame]
				require.LessOrEqual(t, f.Pos+f.Size, len(fr), "frame %d: Terminate outside the frame", p.Frame)
				r.fields[k] = hex.EncodeToString(fr[f.Pos : f.Pos+f.Size])
			default:
				r.fields[k] = f.Show
			}
		}
		out = append(out, r)
	}
	return out
}

// ourRecords renders the dissection the same way.
func ourRecords(t *testing.T, d *dissect.Dissection) []record {
	type keyed struct {
		r      record
		offset int
		dir    dissect.Dir
	}
	var all []keyed
	for _, s := range d.Streams {
		port := func(dir dissect.Dir) int { return int(s.Directions[dir].Src.Port()) }
		for _, h := range []*dissect.Handshake{s.Request, s.Reply} {
			if h == nil || len(h.Frames) == 0 {
				continue
			}
			r := record{frame: h.Frames[len(h.Frames)-1], stream: s.Index, port: port(h.Dir), fields: map[string]string{}}
			if h.Kind == "request" {
				r.fields["iwarp_mpa.key.req"] = hex.EncodeToString([]byte("MPA ID Req Frame"))
			} else {
				r.fields["iwarp_mpa.key.rep"] = hex.EncodeToString([]byte("MPA ID Rep Frame"))
			}
			r.fields["iwarp_mpa.marker_flag"] = b01(h.M)
			r.fields["iwarp_mpa.crc_flag"] = b01(h.C)
			r.fields["iwarp_mpa.rej_flag"] = b01(h.R)
			r.fields["iwarp_mpa.res"] = fmt.Sprintf("0x%02x", uint8(h.Flags)&0x1f)
			r.fields["iwarp_mpa.rev"] = fmt.Sprint(h.Rev)
			r.fields["iwarp_mpa.pdlength"] = fmt.Sprint(h.PDLength)
			if h.PDLength > 0 {
				r.fields["iwarp_mpa.privatedata"] = hex.EncodeToString(h.PrivateData)
			}
			all = append(all, keyed{r, 0, h.Dir})
		}
		for _, f := range s.PDUs {
			if f.Truncated {
				continue
			}
			r := record{frame: f.LastFrame(), stream: s.Index, port: port(f.Dir), fields: map[string]string{}}
			r.fields["iwarp_mpa.ulpdulength"] = fmt.Sprint(f.ULPDULength)
			if f.Pad > 0 {
				r.fields["iwarp_mpa.pad"] = fmt.Sprint(f.Pad)
			}
			field := fmt.Sprintf("0x%08x", binary.BigEndian.Uint32(f.CRCField))
			switch f.CRC {
			case dissect.CRCAbsent:
				r.fields["iwarp_mpa.crc"] = field
			case dissect.CRCGood:
				r.fields["iwarp_mpa.crc_check"] = field + " good"
			case dissect.CRCBad:
				r.fields["iwarp_mpa.crc_check"] = fmt.Sprintf("%s bad, should be 0x%08x", field, binary.BigEndian.Uint32(f.CRCComputed))
			}
			r.fields["iwarp_ddp.tagged_flag"] = b01(f.Tagged)
			r.fields["iwarp_ddp.last_flag"] = b01(f.Last)
			r.fields["iwarp_ddp.dv"] = fmt.Sprint(f.DDPVersion)
			if f.STag != nil {
				r.fields["iwarp_ddp.stag"] = fmt.Sprintf("0x%08x", uint32(*f.STag))
				r.fields["iwarp_ddp.tagged_offset"] = fmt.Sprintf("0x%016x", uint64(*f.TO))
			}
			if f.QN != nil {
				r.fields["iwarp_ddp.qn"] = fmt.Sprint(*f.QN)
				r.fields["iwarp_ddp.msn"] = fmt.Sprint(*f.MSN)
				r.fields["iwarp_ddp.mo"] = fmt.Sprint(*f.MO)
			}
			r.fields["iwarp_rdma.version"] = fmt.Sprint(f.RDMAPVersion)
			r.fields["iwarp_rdma.opcode"] = fmt.Sprintf("0x%02x", f.Opcode)
			if f.InvalidateSTag != nil {
				r.fields["iwarp_rdma.inval_stag"] = fmt.Sprint(uint32(*f.InvalidateSTag)) // tshark shows it in decimal
			}
			if rr := f.ReadRequest; rr != nil {
				r.fields["iwarp_rdma.sinkstag"] = fmt.Sprintf("0x%08x", uint32(rr.SinkSTag))
				r.fields["iwarp_rdma.sinkto"] = fmt.Sprintf("0x%016x", uint64(rr.SinkTO))
				r.fields["iwarp_rdma.rdmardsz"] = fmt.Sprint(rr.Size)
				r.fields["iwarp_rdma.srcstag"] = fmt.Sprintf("0x%08x", uint32(rr.SrcSTag))
				r.fields["iwarp_rdma.srcto"] = fmt.Sprintf("0x%016x", uint64(rr.SrcTO))
			}
			if tm := f.Terminate; tm != nil {
				r.fields["iwarp_rdma.terminate"] = hex.EncodeToString(tm.Raw)
			}
			if a := f.AtomicRequest; a != nil {
				const p = "iwarp_rdma.atomic."
				op, data, mask := "0", "add_data", "add_mask"
				if a.Op == "CmpSwap" {
					op, data, mask = "2", "swap_data", "swap_mask"
				}
				r.fields[p+"opcode"] = op
				r.fields[p+"request_identifier"] = fmt.Sprint(a.ID)
				r.fields[p+"remote_stag"] = fmt.Sprint(uint32(a.STag))
				r.fields[p+"remote_tagged_offset"] = fmt.Sprint(uint64(a.TO))
				r.fields[p+data] = fmt.Sprint(uint64(a.AddSwap))
				r.fields[p+mask] = fmt.Sprintf("0x%016x", uint64(a.AddSwapMask))
				r.fields[p+"compare_data"] = fmt.Sprint(uint64(a.Compare))
				r.fields[p+"compare_mask"] = fmt.Sprintf("0x%016x", uint64(a.CompareMask))
			}
			if a := f.AtomicResponse; a != nil {
				r.fields["iwarp_rdma.atomic.original_request_identifier"] = fmt.Sprint(a.ID)
				r.fields["iwarp_rdma.atomic.original_remote_data_value"] = fmt.Sprint(uint64(a.Orig))
			}
			all = append(all, keyed{r, f.Offset, f.Dir})
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].r.frame != all[j].r.frame {
			return all[i].r.frame < all[j].r.frame
		}
		return all[i].offset < all[j].offset
	})
	out := make([]record, len(all))
	for i, k := range all {
		out[i] = k.r
	}
	return out
}

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// readFrames returns a classic pcap's frames by 1-based frame number.
func readFrames(t *testing.T, file string) map[int][]byte {
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	require.NoError(t, err)
	out := map[int][]byte{}
	for n := 1; ; n++ {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out[n] = data
	}
}

// compareWithTshark decodes file with both decoders and requires the same
// PDUs, field by field, and no frame tshark finds malformed. It returns the
// dissection; without tshark only the decoding happens.
func compareWithTshark(t *testing.T, file string) *dissect.Dissection {
	t.Helper()
	d, err := dissect.DecodeFile(file)
	require.NoError(t, err)
	got := ourRecords(t, d)
	require.NotEmpty(t, got)
	if !tsharktest.Available(t) {
		return d
	}
	require.Empty(t, tsharktest.Fields(t, file, "_ws.malformed", "frame.number"), "frames tshark finds malformed")
	want := tsharkRecords(t, file)
	n := min(len(want), len(got))
	for i := 0; i < n; i++ {
		require.Equal(t, want[i].String(), got[i].String(), "PDU %d of %s (tshark first, ours second)", i, file)
	}
	require.Equal(t, len(want), len(got), "number of MPA PDUs in %s", file)
	return d
}
