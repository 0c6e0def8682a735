package capture

import (
	"bytes"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func fill(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func TestRead_OutOfOrderRetransmitOverlap(t *testing.T) {
	const cisn, sisn = 1000, 5000
	segs := handshake(cli4, srv4, cisn, sisn) // frames 1-3
	d := uint32(cisn + 1)
	segs = append(segs,
		rawSeg{src: cli4, dst: srv4, seq: d + 10, ack: sisn + 1, payload: fill(10, 'b')}, // frame 4: [10,20)
		rawSeg{src: cli4, dst: srv4, seq: d, ack: sisn + 1, payload: fill(10, 'a')},      // frame 5: [0,10)
		rawSeg{src: cli4, dst: srv4, seq: d, ack: sisn + 1, payload: fill(10, 'X')},      // frame 6: retransmit, loses
		rawSeg{src: cli4, dst: srv4, seq: d + 15, ack: sisn + 1, payload: fill(15, 'c')}, // frame 7: [15,30), half new
		rawSeg{src: srv4, dst: cli4, seq: sisn + 1, ack: d + 30, payload: []byte("reply")},
		rawSeg{src: cli4, dst: srv4, seq: d + 30, ack: sisn + 6, fin: true},
	)
	conns, err := Read(bytes.NewReader(writeRaw(t, linkEthernet, segs)))
	require.NoError(t, err)
	require.Len(t, conns, 1)
	c := conns[0]
	require.Equal(t, cli4, c.Client)
	require.Equal(t, srv4, c.Server)
	require.Equal(t, 1, c.FirstFrame)

	up := c.Up
	want := string(fill(10, 'a')) + string(fill(10, 'b')) + string(fill(10, 'c'))
	require.Equal(t, want, string(up.Data))
	require.False(t, up.Truncated)
	require.True(t, up.SYN)
	require.Equal(t, uint32(cisn), up.ISN)
	require.True(t, up.FIN)
	for off, frame := range map[int]int{0: 5, 9: 5, 10: 4, 19: 4, 20: 7, 29: 7, 30: 0, -1: 0} {
		require.Equal(t, frame, up.FrameAt(off), "offset %d", off)
	}
	require.Equal(t, "reply", string(c.Down.Data))
	require.Equal(t, 8, c.Down.FrameAt(0))
	require.False(t, c.Down.FIN)
}

func TestRead_HoleTruncates(t *testing.T) {
	segs := handshake(cli4, srv4, 1, 2)
	segs = append(segs,
		rawSeg{src: cli4, dst: srv4, seq: 2, ack: 3, payload: []byte("0123")},
		rawSeg{src: cli4, dst: srv4, seq: 10, ack: 3, payload: []byte("after-hole")},
	)
	conns, err := Read(bytes.NewReader(writeRaw(t, linkEthernet, segs)))
	require.NoError(t, err)
	require.Equal(t, "0123", string(conns[0].Up.Data))
	require.True(t, conns[0].Up.Truncated)
}

func TestRead_NoHandshake(t *testing.T) {
	// The capture starts mid-connection, and the earliest bytes arrive
	// second; the stream still starts at the lowest sequence number.
	segs := []rawSeg{
		{src: srv4, dst: cli4, seq: 700, ack: 1, payload: []byte("world")},
		{src: srv4, dst: cli4, seq: 694, ack: 1, payload: []byte("hello ")},
	}
	conns, err := Read(bytes.NewReader(writeRaw(t, linkEthernet, segs)))
	require.NoError(t, err)
	require.Len(t, conns, 1)
	require.Equal(t, srv4, conns[0].Client, "without a SYN the first sender is taken as client")
	require.Equal(t, "hello world", string(conns[0].Up.Data))
	require.False(t, conns[0].Up.SYN)
	require.Equal(t, 2, conns[0].Up.FrameAt(0))
	require.Equal(t, 1, conns[0].Up.FrameAt(6))
	require.Empty(t, conns[0].Down.Data)
}

func TestRead_SequenceWraparound(t *testing.T) {
	cisn := uint32(0xfffffff8)
	segs := handshake(cli4, srv4, cisn, 77)
	segs = append(segs,
		rawSeg{src: cli4, dst: srv4, seq: cisn + 1, ack: 78, payload: []byte("abcdefgh")},
		rawSeg{src: cli4, dst: srv4, seq: cisn + 9, ack: 78, payload: []byte("ijklmnop")}, // seq wrapped to 1
	)
	conns, err := Read(bytes.NewReader(writeRaw(t, linkEthernet, segs)))
	require.NoError(t, err)
	require.Equal(t, "abcdefghijklmnop", string(conns[0].Up.Data))
	require.Equal(t, 5, conns[0].Up.FrameAt(8))
}

func TestRead_PortReuseStartsNewConn(t *testing.T) {
	segs := handshake(cli4, srv4, 100, 200)
	segs = append(segs, rawSeg{src: cli4, dst: srv4, seq: 101, ack: 201, payload: []byte("first")})
	segs = append(segs, rawSeg{src: cli4, dst: srv4, seq: 106, ack: 201, fin: true})
	segs = append(segs, handshake(cli4, srv4, 9000, 9500)...)
	segs = append(segs, rawSeg{src: cli4, dst: srv4, seq: 9001, ack: 9501, payload: []byte("second")})
	conns, err := Read(bytes.NewReader(writeRaw(t, linkEthernet, segs)))
	require.NoError(t, err)
	require.Len(t, conns, 2)
	require.Equal(t, "first", string(conns[0].Up.Data))
	require.Equal(t, "second", string(conns[1].Up.Data))
	require.Equal(t, 6, conns[1].FirstFrame)
}

func TestRead_RetransmittedSYNDoesNotSplit(t *testing.T) {
	segs := []rawSeg{{src: cli4, dst: srv4, seq: 100, syn: true}}
	segs = append(segs, handshake(cli4, srv4, 100, 200)...)
	segs = append(segs, rawSeg{src: cli4, dst: srv4, seq: 101, ack: 201, payload: []byte("x")})
	conns, err := Read(bytes.NewReader(writeRaw(t, linkEthernet, segs)))
	require.NoError(t, err)
	require.Len(t, conns, 1)
	require.Equal(t, "x", string(conns[0].Up.Data))
}

func TestRead_LinkTypes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		kind     linkKind
		c, s     netip.AddrPort
		pcapng   bool
		wantConn int
	}{
		{"ethernet-v4", linkEthernet, cli4, srv4, false, 1},
		{"ethernet-v6", linkEthernet, cli6, srv6, false, 1},
		{"ethernet-vlan", linkEthernetVLAN, cli4, srv4, false, 1},
		{"linux-sll-v4", linkSLL, cli4, srv4, false, 1},
		{"linux-sll-v6", linkSLL, cli6, srv6, false, 1},
		{"linux-sll2-v4", linkSLL2, cli4, srv4, false, 1},
		{"raw-v4", linkRaw, cli4, srv4, false, 1},
		{"raw-v6", linkRaw, cli6, srv6, false, 1},
		{"ipv4-linktype", linkIPv4Only, cli4, srv4, false, 1},
		{"null-v4", linkNull, cli4, srv4, false, 1},
		{"pcapng-ethernet", linkEthernet, cli4, srv4, true, 1},
		{"pcapng-raw-v6", linkRaw, cli6, srv6, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			segs := handshake(tc.c, tc.s, 10, 20)
			segs = append(segs,
				rawSeg{src: tc.c, dst: tc.s, seq: 11, ack: 21, payload: []byte("MPA ID Req Frame")},
				rawSeg{src: tc.s, dst: tc.c, seq: 21, ack: 27, payload: []byte("MPA ID Rep Frame")},
			)
			var file []byte
			if tc.pcapng {
				file = writeRawNg(t, tc.kind, segs)
			} else {
				file = writeRaw(t, tc.kind, segs)
			}
			conns, err := Read(bytes.NewReader(file))
			require.NoError(t, err)
			require.Len(t, conns, tc.wantConn)
			require.Equal(t, tc.c, conns[0].Client)
			require.Equal(t, "MPA ID Req Frame", string(conns[0].Up.Data))
			require.Equal(t, "MPA ID Rep Frame", string(conns[0].Down.Data))
			require.Equal(t, 4, conns[0].Up.FrameAt(0))
			require.Equal(t, 5, conns[0].Down.FrameAt(15))
		})
	}
}

func TestRead_RejectsGarbage(t *testing.T) {
	_, err := Read(bytes.NewReader([]byte("not a capture at all")))
	require.Error(t, err)
	_, err = Read(bytes.NewReader(nil))
	require.Error(t, err)
}

// The frame numbers below were read off tshark 4.0.17 for the same files.
func TestRead_RealCaptures(t *testing.T) {
	for _, tc := range []struct {
		file  string
		conns int
		// first connection: frames of the MPA Request, Reply and the first
		// FPDU in each direction (as offsets into the streams)
		reqFrame, repFrame int
		upFPDUOff          int
		upFPDUFrame        int
	}{
		{"rping-lo.pcap", 1, 4, 6, 24, 8},
		{"rping-mtu1500.pcap", 1, 4, 6, 24, 8},
		{"mpa-host-client.pcap", 21, 4, 6, 0, 4}, // rev 1 exchange, no FPDU
		{"mpa-guest-client.pcap", 9, 4, 6, 24, 8},
		{"ib_send_bw.pcap", 2, 4, 6, 24, 8},
		{"ib_write_bw.pcap", 2, 4, 6, 24, 8},
	} {
		t.Run(tc.file, func(t *testing.T) {
			conns, err := ReadFile(filepath.Join("testdata", tc.file))
			require.NoError(t, err)
			require.Len(t, conns, tc.conns)
			for i, c := range conns {
				require.True(t, c.Up.SYN, "conn %d", i)
				require.False(t, c.Up.Truncated, "conn %d", i)
				require.False(t, c.Down.Truncated, "conn %d", i)
				if len(c.Up.Data) > 0 {
					require.Equal(t, "MPA ID ", string(c.Up.Data[:7]), "conn %d starts with an MPA key", i)
				}
			}
			c := conns[0]
			require.Equal(t, "MPA ID Req Frame", string(c.Up.Data[:16]))
			require.Equal(t, "MPA ID Rep Frame", string(c.Down.Data[:16]))
			require.Equal(t, tc.reqFrame, c.Up.FrameAt(0))
			require.Equal(t, tc.repFrame, c.Down.FrameAt(0))
			require.Equal(t, tc.upFPDUFrame, c.Up.FrameAt(tc.upFPDUOff))
		})
	}
}

func ExampleReadFile() {
	conns, err := ReadFile("testdata/rping-lo.pcap")
	if err != nil {
		panic(err)
	}
	c := conns[0]
	fmt.Println(c.Client.Port(), "->", c.Server.Port())
	fmt.Printf("%q from frame %d\n", c.Up.Data[:16], c.Up.FrameAt(0))
	fmt.Printf("%q from frame %d\n", c.Down.Data[:16], c.Down.FrameAt(0))
	// Output:
	// 48856 -> 7174
	// "MPA ID Req Frame" from frame 4
	// "MPA ID Rep Frame" from frame 6
}
