package capture

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

// conversation writes one flow with the given chunks (alternating as listed)
// and returns the capture bytes.
type chunkSpec struct {
	dir  Dir
	data []byte
}

func writeConversation(t *testing.T, cfg FlowConfig, chunks []chunkSpec) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, nil)
	require.NoError(t, err)
	f, err := w.Open(cfg)
	require.NoError(t, err)
	for _, c := range chunks {
		require.NoError(t, f.Segment(c.dir, c.data))
	}
	require.NoError(t, f.Close())
	return out.Bytes()
}

func patterned(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestWriter_RoundTrip(t *testing.T) {
	for _, fam := range []struct {
		name string
		c, s netip.AddrPort
	}{{"ipv4", cli4, srv4}, {"ipv6", cli6, srv6}} {
		t.Run(fam.name, func(t *testing.T) {
			chunks := []chunkSpec{
				{Up, []byte("MPA ID Req Frame\x10\x02\x00\x04\x00\x01\x00\x01")},
				{Down, []byte("MPA ID Rep Frame\x10\x02\x00\x04\x00\x01\x00\x01")},
				{Up, patterned(1, 1)},
				{Up, patterned(MaxSegment, 2)},
				{Down, patterned(513, 3)},
				{Up, patterned(4096, 4)},
			}
			file := writeConversation(t, FlowConfig{Client: fam.c, Server: fam.s, ClientISN: 0xfffff000}, chunks)
			conns, err := Read(bytes.NewReader(file))
			require.NoError(t, err)
			require.Len(t, conns, 1)
			c := conns[0]
			require.Equal(t, fam.c, c.Client)
			require.Equal(t, fam.s, c.Server)
			require.True(t, c.Up.SYN)
			require.Equal(t, uint32(0xfffff000), c.Up.ISN)
			require.True(t, c.Up.FIN)
			require.True(t, c.Down.FIN)

			var up, down []byte
			frame := 4 // after SYN, SYN-ACK, ACK
			for _, ch := range chunks {
				st, off := c.Up, len(up)
				if ch.dir == Up {
					up = append(up, ch.data...)
				} else {
					st, off = c.Down, len(down)
					down = append(down, ch.data...)
				}
				require.Equal(t, frame, st.FrameAt(off), "first byte of the chunk")
				require.Equal(t, frame, st.FrameAt(off+len(ch.data)-1), "last byte of the chunk")
				frame++
			}
			require.Equal(t, up, c.Up.Data)
			require.Equal(t, down, c.Down.Data)
		})
	}
}

// The writer encodes headers itself; gopacket's serializer, given the same
// fields, must produce identical bytes (checksums included).
func TestWriter_BytesMatchGopacket(t *testing.T) {
	for _, fam := range []struct {
		name string
		c, s netip.AddrPort
	}{{"ipv4", cli4, srv4}, {"ipv6", cli6, srv6}} {
		t.Run(fam.name, func(t *testing.T) {
			payload := patterned(1001, 9)
			var out bytes.Buffer
			w, err := NewWriter(&out, nil)
			require.NoError(t, err)
			f, err := w.Open(FlowConfig{Client: fam.c, Server: fam.s, ClientISN: 111, ServerISN: 222, MSS: 1460})
			require.NoError(t, err)
			require.NoError(t, f.Segment(Down, payload))

			frames := splitFrames(t, out.Bytes())
			require.Len(t, frames, 4)

			// frame 1: the SYN with an MSS option
			syn := &layers.TCP{SrcPort: layers.TCPPort(fam.c.Port()), DstPort: layers.TCPPort(fam.s.Port()),
				Seq: 111, SYN: true, Window: 65535,
				Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}}
			require.Equal(t, serializeLike(t, fam.c, fam.s, 0, syn, nil), frames[0])

			// frame 4: the data segment from the server
			data := &layers.TCP{SrcPort: layers.TCPPort(fam.s.Port()), DstPort: layers.TCPPort(fam.c.Port()),
				Seq: 223, Ack: 112, ACK: true, PSH: true, Window: 65535}
			require.Equal(t, serializeLike(t, fam.s, fam.c, 1, data, payload), frames[3])
		})
	}
}

// serializeLike builds the frame the writer should produce with gopacket.
func serializeLike(t *testing.T, src, dst netip.AddrPort, ipID uint16, tcp *layers.TCP, payload []byte) []byte {
	t.Helper()
	sm, dm := macFor(src.Addr()), macFor(dst.Addr())
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(sm[:]), DstMAC: net.HardwareAddr(dm[:])}
	var ip gopacket.SerializableLayer
	if src.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		v4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, Id: ipID,
			Flags: layers.IPv4DontFragment, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		require.NoError(t, tcp.SetNetworkLayerForChecksum(v4))
		ip = v4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		require.NoError(t, tcp.SetNetworkLayerForChecksum(v6))
		ip = v6
	}
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, tcp, gopacket.Payload(payload)))
	return bytes.Clone(buf.Bytes())
}

// splitFrames returns the packet records of a pcap file.
func splitFrames(t *testing.T, file []byte) [][]byte {
	t.Helper()
	require.GreaterOrEqual(t, len(file), 24)
	var out [][]byte
	b := file[24:]
	for len(b) > 0 {
		require.GreaterOrEqual(t, len(b), 16)
		n := int(uint32(b[8]) | uint32(b[9])<<8 | uint32(b[10])<<16 | uint32(b[11])<<24)
		out = append(out, b[16:16+n])
		b = b[16+n:]
	}
	return out
}

func TestWriter_SegmentLimits(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{}, nil)
	require.NoError(t, err)
	f, err := w.Open(FlowConfig{Client: cli4, Server: srv4})
	require.NoError(t, err)
	require.ErrorIs(t, f.Segment(Up, nil), ErrSegmentSize)
	require.ErrorIs(t, f.Segment(Up, make([]byte, MaxSegment+1)), ErrSegmentSize)
	require.NoError(t, f.Segment(Up, make([]byte, MaxSegment)))
	require.NoError(t, f.Close())
	require.ErrorIs(t, f.Segment(Up, []byte("x")), ErrFlowClosed)
	require.ErrorIs(t, f.Close(), ErrFlowClosed)
}

func TestWriter_RejectsMixedFamilies(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{}, nil)
	require.NoError(t, err)
	_, err = w.Open(FlowConfig{Client: cli4, Server: srv6})
	require.ErrorIs(t, err, ErrAddress)
	_, err = w.Open(FlowConfig{Client: netip.AddrPort{}, Server: srv4})
	require.ErrorIs(t, err, ErrAddress)
}

func TestWriter_Deterministic(t *testing.T) {
	chunks := []chunkSpec{{Up, []byte("abc")}, {Down, []byte("defg")}}
	a := writeConversation(t, FlowConfig{Client: cli4, Server: srv4}, chunks)
	b := writeConversation(t, FlowConfig{Client: cli4, Server: srv4}, chunks)
	require.Equal(t, a, b)
}

func TestWriter_Clock(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	var out bytes.Buffer
	w, err := NewWriter(&out, &WriterOptions{Clock: func() time.Time { return at }})
	require.NoError(t, err)
	_, err = w.Open(FlowConfig{Client: cli4, Server: srv4})
	require.NoError(t, err)
	rec := out.Bytes()[24:]
	sec := uint32(rec[0]) | uint32(rec[1])<<8 | uint32(rec[2])<<16 | uint32(rec[3])<<24
	nsec := uint32(rec[4]) | uint32(rec[5])<<8 | uint32(rec[6])<<16 | uint32(rec[7])<<24
	require.Equal(t, uint32(at.Unix()), sec)
	require.Equal(t, uint32(6000), nsec)
}

// Two flows written from several goroutines at once still reassemble.
func TestWriter_ConcurrentFlows(t *testing.T) {
	var out bytes.Buffer
	w, err := NewWriter(&out, nil)
	require.NoError(t, err)
	flows := make([]*Flow, 4)
	for i := range flows {
		flows[i], err = w.Open(FlowConfig{Client: netip.AddrPortFrom(cli4.Addr(), uint16(50000+i)), Server: srv4})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for i, f := range flows {
		for _, d := range []Dir{Up, Down} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 50; k++ {
					if err := f.Segment(d, []byte(fmt.Sprintf("%d%s%03d;", i, d, k))); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	conns, err := Read(bytes.NewReader(out.Bytes()))
	require.NoError(t, err)
	require.Len(t, conns, 4)
	for i, c := range conns {
		var up, down strings.Builder
		for k := 0; k < 50; k++ {
			fmt.Fprintf(&up, "%dup%03d;", i, k)
			fmt.Fprintf(&down, "%ddown%03d;", i, k)
		}
		require.Equal(t, up.String(), string(c.Up.Data))
		require.Equal(t, down.String(), string(c.Down.Data))
	}
}

// tshark must accept the file: valid IP and TCP checksums, nothing malformed.
func TestWriter_TsharkAcceptsCapture(t *testing.T) {
	tshark := testutil.RequireTool(t, "tshark")
	path := filepath.Join(t.TempDir(), "w.pcap")
	file := writeConversation(t, FlowConfig{Client: cli4, Server: srv4}, []chunkSpec{
		{Up, patterned(100, 1)}, {Down, patterned(2000, 2)}, {Up, patterned(MaxSegment, 3)},
	})
	require.NoError(t, os.WriteFile(path, file, 0o644))
	out, err := exec.Command(tshark, "-r", path, "-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
		"-T", "fields", "-e", "frame.number", "-e", "ip.checksum.status", "-e", "tcp.checksum.status", "-e", "_ws.malformed").Output()
	require.NoError(t, err, string(out))
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	require.Len(t, lines, 9) // 3 handshake + 3 data + 3 close
	for _, l := range lines {
		f := strings.Split(l, "\t")
		require.Len(t, f, 4, l)
		// Wireshark checksum status: 0 bad, 1 good, 2 unverified.
		require.Equal(t, "1", f[1], "IP checksum good in %q", l)
		require.Equal(t, "1", f[2], "TCP checksum good in %q", l)
		require.Empty(t, f[3], "not malformed: %q", l)
	}
}

func ExampleWriter() {
	var file bytes.Buffer
	w, _ := NewWriter(&file, nil)
	f, _ := w.Open(FlowConfig{
		Client: netip.MustParseAddrPort("192.0.2.1:40000"),
		Server: netip.MustParseAddrPort("192.0.2.2:7174"),
	})
	_ = f.Segment(Up, []byte("hello"))
	_ = f.Segment(Down, []byte("world"))
	_ = f.Close()

	conns, _ := Read(&file)
	fmt.Printf("%s %s\n", conns[0].Up.Data, conns[0].Down.Data)
	fmt.Println(conns[0].Up.FrameAt(0), conns[0].Down.FrameAt(0))
	// Output:
	// hello world
	// 4 5
}
