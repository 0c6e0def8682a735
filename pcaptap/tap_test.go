package pcaptap_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/pcaptap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exchange runs a conversation over a tapped client conn and the untapped
// server conn: both sides write random-sized chunks concurrently, one of
// them larger than a segment, then the client closes. It returns what the
// client sent and what it received.
func exchange(t *testing.T, client, server net.Conn, seed uint64) (sent, received []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	chunks := func(n int) [][]byte {
		var out [][]byte
		for i := 0; i < n; i++ {
			size := 1 + rng.IntN(3000)
			if i == n/2 {
				size = 3*pcaptap.MaxSegment + 17
			}
			b := make([]byte, size)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			out = append(out, b)
		}
		return out
	}
	up, down := chunks(20), chunks(15)
	upLen, downLen := len(bytes.Join(up, nil)), len(bytes.Join(down, nil))
	var wg sync.WaitGroup
	var serverGot, clientGot bytes.Buffer
	wg.Add(1)
	go func() { // server: reads the first chunk, writes its own, drains
		defer wg.Done()
		_, err := io.CopyN(&serverGot, server, int64(len(up[0])))
		assert.NoError(t, err)
		for _, c := range down {
			_, err := server.Write(c)
			assert.NoError(t, err)
		}
		_, err = io.CopyN(&serverGot, server, int64(upLen-len(up[0])))
		assert.NoError(t, err)
	}()
	// The client's first call is a Write, so the tap records it as the
	// side that sent the SYN.
	_, err := client.Write(up[0])
	require.NoError(t, err)
	wg.Add(2)
	go func() { // client writes the rest
		defer wg.Done()
		for _, c := range up[1:] {
			_, err := client.Write(c)
			assert.NoError(t, err)
		}
	}()
	go func() { // client reads
		defer wg.Done()
		_, err := io.CopyN(&clientGot, client, int64(downLen))
		assert.NoError(t, err)
	}()
	wg.Wait()
	require.NoError(t, client.Close())
	require.NoError(t, server.Close())
	require.Equal(t, bytes.Join(up, nil), serverGot.Bytes())
	return bytes.Join(up, nil), clientGot.Bytes()
}

func tcpPair(t *testing.T, addr string) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil && addr == "[::1]:0" {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	require.NoError(t, err)
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		assert.NoError(t, err)
		acc <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	return client, <-acc
}

// The capture holds exactly the bytes that crossed the connection, in
// both directions, with the connection's real addresses, over IPv4 and
// IPv6.
func TestTap_RoundTripTCP(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) { roundTrip(t, addr) })
	}
}

func roundTrip(t *testing.T, addr string) {
	var out bytes.Buffer
	tap, err := pcaptap.New(&out)
	require.NoError(t, err)
	rawClient, server := tcpPair(t, addr)
	client := tap.Wrap(rawClient)
	sent, received := exchange(t, client, server, 1)
	require.NoError(t, tap.Close())

	conns, err := capture.Read(bytes.NewReader(out.Bytes()))
	require.NoError(t, err)
	require.Len(t, conns, 1)
	c := conns[0]
	require.Equal(t, rawClient.LocalAddr().(*net.TCPAddr).AddrPort(), c.Client)
	require.Equal(t, rawClient.RemoteAddr().(*net.TCPAddr).AddrPort(), c.Server)
	require.True(t, c.Up.SYN && c.Down.SYN, "handshake recorded")
	require.True(t, c.Up.FIN && c.Down.FIN, "FIN exchange recorded")
	require.False(t, c.Up.Truncated || c.Down.Truncated)
	require.Equal(t, sent, c.Up.Data)
	require.Equal(t, received, c.Down.Data)
	checkTCP(t, out.Bytes())
}

// checkTCP reads every frame back and checks the TCP framing: no segment
// over MaxSegment, sequence numbers that continue where the direction left
// off, and acknowledgements that never run ahead of what the other side
// has sent.
func checkTCP(t *testing.T, pcap []byte) {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(pcap))
	require.NoError(t, err)
	type end struct {
		nxt  uint32
		seen bool
	}
	ends := map[netip.AddrPort]*end{}
	frames := 0
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		frames++
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		tcp, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		require.True(t, ok, "frame %d is TCP", frames)
		require.LessOrEqual(t, len(tcp.Payload), pcaptap.MaxSegment, "frame %d", frames)
		var src, dst netip.AddrPort
		switch ip := pkt.NetworkLayer().(type) {
		case *layers.IPv4:
			s, _ := netip.AddrFromSlice(ip.SrcIP.To4())
			d, _ := netip.AddrFromSlice(ip.DstIP.To4())
			src, dst = netip.AddrPortFrom(s, uint16(tcp.SrcPort)), netip.AddrPortFrom(d, uint16(tcp.DstPort))
		case *layers.IPv6:
			s, _ := netip.AddrFromSlice(ip.SrcIP)
			d, _ := netip.AddrFromSlice(ip.DstIP)
			src, dst = netip.AddrPortFrom(s, uint16(tcp.SrcPort)), netip.AddrPortFrom(d, uint16(tcp.DstPort))
		default:
			t.Fatalf("frame %d: network layer %T", frames, ip)
		}
		e := ends[src]
		if e == nil {
			e = &end{}
			ends[src] = e
		}
		if e.seen {
			require.Equal(t, e.nxt, tcp.Seq, "frame %d: sequence number", frames)
		}
		e.seen = true
		e.nxt = tcp.Seq + uint32(len(tcp.Payload))
		if tcp.SYN || tcp.FIN {
			e.nxt++
		}
		if tcp.ACK {
			peer := ends[dst]
			require.NotNil(t, peer, "frame %d acknowledges a silent peer", frames)
			require.Equal(t, peer.nxt, tcp.Ack, "frame %d: acknowledgement number", frames)
		}
	}
	require.Greater(t, frames, 3)
}

// Over a connection without TCP addresses (net.Pipe) the capture uses
// made-up addresses; many connections recorded at once into one Tap each
// keep their own, and every stream comes back intact.
func TestTap_ManyPipesOneTap(t *testing.T) {
	var out bytes.Buffer
	tap, err := pcaptap.New(&out)
	require.NoError(t, err)
	const n = 8
	type result struct{ sent, received []byte }
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := net.Pipe()
			results[i].sent, results[i].received = exchange(t, tap.Wrap(a), b, uint64(i+10))
		}()
	}
	wg.Wait()
	require.NoError(t, tap.Close())

	conns, err := capture.Read(bytes.NewReader(out.Bytes()))
	require.NoError(t, err)
	require.Len(t, conns, n)
	seen := map[netip.AddrPort]bool{}
	for _, c := range conns {
		require.False(t, seen[c.Client], "client address %v reused", c.Client)
		seen[c.Client] = true
		require.True(t, netip.MustParsePrefix("192.0.2.0/24").Contains(c.Client.Addr()))
		require.True(t, netip.MustParsePrefix("192.0.2.0/24").Contains(c.Server.Addr()))
		found := false
		for _, r := range results {
			if bytes.Equal(r.sent, c.Up.Data) {
				require.Equal(t, r.received, c.Down.Data)
				found = true
			}
		}
		require.True(t, found, "stream of %v matches no connection", c.Client)
	}
	checkTCP(t, out.Bytes())
}

// The side that reads first is recorded as the server: the MPA responder
// waits for the Request, so its peer's SYN opens the capture.
func TestTap_FirstReaderIsServer(t *testing.T) {
	var out bytes.Buffer
	tap, err := pcaptap.New(&out)
	require.NoError(t, err)
	a, b := net.Pipe()
	ta := tap.Wrap(a)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 5)
		_, err := io.ReadFull(ta, buf)
		assert.NoError(t, err)
		_, err = ta.Write([]byte("reply"))
		assert.NoError(t, err)
	}()
	_, err = b.Write([]byte("hello"))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(b, buf)
	require.NoError(t, err)
	<-done
	require.NoError(t, ta.Close())
	require.NoError(t, b.Close())
	require.NoError(t, tap.Close())

	conns, err := capture.Read(bytes.NewReader(out.Bytes()))
	require.NoError(t, err)
	require.Len(t, conns, 1)
	require.Equal(t, "hello", string(conns[0].Up.Data), "the peer of the tapped side is the client")
	require.Equal(t, "reply", string(conns[0].Down.Data))
}

// After Close the Tap records nothing, and connections keep working.
func TestTap_Close(t *testing.T) {
	var out bytes.Buffer
	tap, err := pcaptap.New(&out)
	require.NoError(t, err)
	a, b := net.Pipe()
	ta := tap.Wrap(a)
	go func() { io.Copy(io.Discard, b) }()
	_, err = ta.Write([]byte("before"))
	require.NoError(t, err)
	require.NoError(t, tap.Flush())
	size := out.Len()
	require.NoError(t, tap.Close())
	require.NoError(t, tap.Close(), "Close is idempotent")
	require.ErrorIs(t, tap.Flush(), pcaptap.ErrClosed)
	_, err = ta.Write([]byte("after"))
	require.NoError(t, err)
	require.NoError(t, ta.Close())
	require.Equal(t, size, out.Len(), "nothing written after Close")
	c, d := net.Pipe()
	defer c.Close()
	defer d.Close()
	require.Same(t, c, tap.Wrap(c), "Wrap after Close returns the connection itself")

	conns, err := capture.Read(bytes.NewReader(out.Bytes()))
	require.NoError(t, err)
	require.Len(t, conns, 1)
	require.Equal(t, "before", string(conns[0].Up.Data))
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

// A capture that cannot be written never disturbs the connection; the
// error is kept for Err and Close.
func TestTap_WriteErrorKeepsConnectionWorking(t *testing.T) {
	_, err := pcaptap.New(&failingWriter{})
	require.Error(t, err, "the file header cannot be written")
	_, err = pcaptap.New(nil)
	require.Error(t, err)

	tap, err := pcaptap.New(&failingWriter{after: 1})
	require.NoError(t, err)
	a, b := net.Pipe()
	sent, received := exchange(t, tap.Wrap(a), b, 3)
	require.NotEmpty(t, sent)
	require.NotEmpty(t, received)
	require.ErrorContains(t, tap.Err(), "disk full")
	require.ErrorContains(t, tap.Close(), "disk full")
}
