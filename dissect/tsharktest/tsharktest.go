// Package tsharktest runs tshark as an oracle in tests: it decodes a
// capture with Wireshark's iWARP dissectors and returns every MPA and
// DDP/RDMAP PDU with its fields, for field-by-field comparison with package
// dissect or any other producer of captures.
//
// Tests that need tshark call Path: without tshark the test is skipped,
// unless the environment sets IWARP_REQUIRE_TOOLS=1 (as CI does), which
// makes it fail instead.
package tsharktest

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

// Args are the options every decode uses: dissect.TsharkArgs, which say
// why each is needed.
var Args = dissect.TsharkArgs

// Available reports whether tshark is installed. Without it, it fails t
// when IWARP_REQUIRE_TOOLS=1 and otherwise logs that the comparison is
// skipped, so that the caller can still run its own checks.
func Available(t testing.TB) bool {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		if os.Getenv("IWARP_REQUIRE_TOOLS") == "1" {
			t.Fatalf("tshark is required (IWARP_REQUIRE_TOOLS=1): %v", err)
		}
		t.Log("tshark not installed: comparison skipped")
		return false
	}
	return true
}

// Path returns the tshark executable. Without one it skips t, or fails it
// when IWARP_REQUIRE_TOOLS=1.
func Path(t testing.TB) string {
	t.Helper()
	return testutil.RequireTool(t, "tshark")
}

// Field is one field of tshark's PDML output.
type Field struct {
	Name string
	// Show is the value as tshark displays it ("0x0000beef", "34");
	// Value the raw octets in hex for byte fields; ShowName the whole
	// line ("CRC check: 0x… (Good CRC32)").
	Show, Value, ShowName string
	// Pos and Size locate the field in the frame, or in the reassembled
	// data when the PDU spans frames.
	Pos, Size int
}

// PDU is one MPA PDU tshark decoded: a Request, a Reply or an FPDU with
// the DDP/RDMAP header that follows it.
type PDU struct {
	Frame   int // frame.number: the frame that completes the PDU
	Stream  int // tcp.stream
	SrcPort int // tcp.srcport
	// MPA holds the fields of the iwarp_mpa protocol, DDP those of the
	// iwarp_ddp_rdmap protocol that follows it (nil if none), by name;
	// for a repeated name the first occurrence.
	MPA, DDP map[string]Field
}

// PDUs decodes file with tshark and returns its MPA PDUs in frame order
// and, within a frame, in stream order.
func PDUs(t testing.TB, file string) []PDU {
	t.Helper()
	bin := Path(t)
	args := append([]string{"-r", file}, Args...)
	args = append(args, "-Y", "iwarp_mpa", "-T", "pdml")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %v: %v\n%s", args, err, stderr.String())
	}
	pdus, err := parsePDML(out)
	if err != nil {
		t.Fatalf("parsing tshark's PDML for %s: %v", file, err)
	}
	return pdus
}

type pdml struct {
	Packets []pdmlPacket `xml:"packet"`
}

type pdmlPacket struct {
	Protos []pdmlNode `xml:"proto"`
}

type pdmlNode struct {
	Name     string     `xml:"name,attr"`
	Show     string     `xml:"show,attr"`
	Value    string     `xml:"value,attr"`
	ShowName string     `xml:"showname,attr"`
	Pos      string     `xml:"pos,attr"`
	Size     string     `xml:"size,attr"`
	Fields   []pdmlNode `xml:"field"`
	Protos   []pdmlNode `xml:"proto"`
}

func parsePDML(b []byte) ([]PDU, error) {
	var doc pdml
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var out []PDU
	for _, p := range doc.Packets {
		var frame, stream, port int
		var cur *PDU
		for i := range p.Protos {
			pr := &p.Protos[i]
			switch pr.Name {
			case "geninfo":
				frame = atoi(find(pr, "num").Show)
			case "tcp":
				stream = atoi(find(pr, "tcp.stream").Show)
				port = atoi(find(pr, "tcp.srcport").Show)
			case "iwarp_mpa":
				out = append(out, PDU{Frame: frame, Stream: stream, SrcPort: port, MPA: flatten(pr)})
				cur = &out[len(out)-1]
			case "iwarp_ddp_rdmap":
				if cur != nil && cur.DDP == nil {
					cur.DDP = flatten(pr)
				}
			}
		}
	}
	return out, nil
}

func find(n *pdmlNode, name string) Field {
	return flatten(n)[name]
}

func flatten(n *pdmlNode) map[string]Field {
	m := map[string]Field{}
	var walk func(*pdmlNode)
	walk = func(n *pdmlNode) {
		for i := range n.Fields {
			f := &n.Fields[i]
			if _, dup := m[f.Name]; !dup && f.Name != "" {
				m[f.Name] = Field{Name: f.Name, Show: f.Show, Value: f.Value, ShowName: f.ShowName, Pos: atoi(f.Pos), Size: atoi(f.Size)}
			}
			walk(f)
		}
	}
	walk(n)
	return m
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// Fields runs tshark on file with the display filter and returns, per
// matching frame, the values of the named fields (tshark -T fields; a
// repeated field's values are joined with ',').
func Fields(t testing.TB, file, filter string, fields ...string) [][]string {
	t.Helper()
	bin := Path(t)
	args := append([]string{"-r", file}, Args...)
	if filter != "" {
		args = append(args, "-Y", filter)
	}
	args = append(args, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,")
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %v: %v\n%s", args, err, stderr.String())
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line != "" {
			rows = append(rows, strings.Split(line, "\t"))
		}
	}
	return rows
}
