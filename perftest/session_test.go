package perftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Every test in the package ends with no goroutine of the package left.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// pair runs cfg between a Serve and a Dial over loopback and returns both
// sides' rows and printed text.
type pairResult struct {
	client, server       []Result
	clientErr, serverErr error
	clientOut, serverOut string
}

func runPair(t testing.TB, cfg Config) *pairResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var r pairResult
	var sout, cout bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		scfg := cfg
		scfg.Output = &sout
		r.server, r.serverErr = Serve(ctx, ln, conn.NewPD(), scfg)
	}()
	ccfg := cfg
	ccfg.Output = &cout
	r.client, r.clientErr = Dial(ctx, ln.Addr().String(), conn.NewPD(), ccfg)
	if r.clientErr != nil {
		cancel()
	}
	<-done
	r.clientOut, r.serverOut = cout.String(), sout.String()
	return &r
}

func requireOK(t *testing.T, r *pairResult) {
	t.Helper()
	require.NoError(t, r.clientErr, "client\n%s\nserver\n%s", r.clientOut, r.serverOut)
	require.NoError(t, r.serverErr, "server\n%s\nclient\n%s", r.serverOut, r.clientOut)
}

// TestLoopbackBandwidth: the bandwidth tests between two iwarp-go sides.
// A write_bw or read_bw server prints the client's report, which it
// receives in the report exchange; a send_bw server its own count, the
// client paced by its credits.
func TestLoopbackBandwidth(t *testing.T) {
	for _, test := range []Test{WriteBW, ReadBW, SendBW} {
		for _, size := range []int{64, 65536} {
			t.Run(fmt.Sprintf("%v/%d", test, size), func(t *testing.T) {
				r := runPair(t, Config{Test: test, Size: size, Iters: 200})
				requireOK(t, r)
				require.Len(t, r.client, 1)
				require.Len(t, r.server, 1)
				c, s := r.client[0].BW, r.server[0].BW
				assert.Equal(t, uint64(size), c.Size)
				assert.Equal(t, uint64(200), c.Iters)
				if test == SendBW {
					assert.Equal(t, c.Iters, s.Iters, "the server received every Send")
					assert.Zero(t, s.BWPeak, "a send_bw server has no peak")
				} else {
					assert.Equal(t, *c, *s, "the server prints the client's report")
				}
				assert.Greater(t, c.BWAvg, 0.0)
				assert.GreaterOrEqual(t, c.BWPeak, c.BWAvg*(1-1e-9), "the peak is the best stretch")
				for _, out := range []string{r.clientOut, r.serverOut} {
					assert.Contains(t, out, "BW average[MB/sec]")
					assert.Contains(t, out, fmt.Sprintf("\n %-7d    %-10d ", size, 200))
				}
				assert.Contains(t, r.serverOut, "* Waiting for client to connect... *")
			})
		}
	}
}

// TestLoopbackAllSizes: -a runs every power of two to 8 MiB; send_bw and
// send_lat post receives and synchronise before each size, send_bw's
// credits start again from zero.
func TestLoopbackAllSizes(t *testing.T) {
	for _, test := range []Test{WriteBW, SendBW, SendLat} {
		t.Run(test.String(), func(t *testing.T) {
			r := runPair(t, Config{Test: test, AllSizes: true, Iters: 5, ReportGbits: true})
			requireOK(t, r)
			require.Len(t, r.client, 23)
			for i, row := range r.client {
				assert.Equal(t, uint64(2)<<i, row.Size())
				assert.Equal(t, uint64(5), row.Iters())
			}
			if test == WriteBW {
				require.Len(t, r.server, 1)
				assert.Equal(t, uint64(MaxSize), r.server[0].BW.Size, "the report of the last size")
				assert.Contains(t, r.clientOut, "BW average[Gb/sec]")
			} else {
				require.Len(t, r.server, 23)
			}
		})
	}
}

// TestLoopbackMultipleQPs: -q 3 opens three test connections on the port.
func TestLoopbackMultipleQPs(t *testing.T) {
	for _, test := range []Test{ReadBW, SendBW} {
		r := runPair(t, Config{Test: test, Size: 4096, Iters: 50, QPs: 3})
		requireOK(t, r)
		require.Len(t, r.client, 1)
		assert.Equal(t, uint64(150), r.client[0].BW.Iters, "perftest reports iterations times queue pairs")
		assert.Equal(t, 3, strings.Count(r.clientOut, " remote address: "))
		if test == SendBW {
			assert.Equal(t, uint64(150), r.server[0].BW.Iters)
		}
	}
}

// TestLoopbackLatency: the three _lat tests; write_lat's sides watch the
// last byte of their buffers, which the peer's Writes fill.
func TestLoopbackLatency(t *testing.T) {
	for _, test := range []Test{WriteLat, ReadLat, SendLat} {
		for _, size := range []int{2, 4096, 65536} {
			t.Run(fmt.Sprintf("%v/%d", test, size), func(t *testing.T) {
				r := runPair(t, Config{Test: test, Size: size, Iters: 100})
				requireOK(t, r)
				require.Len(t, r.client, 1)
				c := r.client[0].Lat
				assert.Equal(t, uint64(100), c.Iters)
				assert.Greater(t, c.TTypical, 0.0)
				assert.LessOrEqual(t, c.TMin, c.TTypical)
				assert.LessOrEqual(t, c.TTypical, c.TMax)
				if test == ReadLat {
					assert.Empty(t, r.server, "the read_lat server measures nothing")
					assert.NotContains(t, r.serverOut, "t_typical")
				} else {
					require.Len(t, r.server, 1)
					assert.Equal(t, uint64(100), r.server[0].Lat.Iters)
				}
			})
		}
	}
}

// TestLoopbackDuration: -D runs for whole seconds and counts what
// completed in the sampling window.
func TestLoopbackDuration(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	for _, test := range []Test{WriteBW, ReadLat} {
		t.Run(test.String(), func(t *testing.T) {
			start := time.Now()
			r := runPair(t, Config{Test: test, Size: 64, Duration: 2 * time.Second})
			requireOK(t, r)
			assert.GreaterOrEqual(t, time.Since(start), 2*time.Second)
			require.Len(t, r.client, 1)
			assert.Positive(t, r.client[0].Iters())
		})
	}
}

func TestConfigRejects(t *testing.T) {
	for _, c := range []Config{
		{},
		{Test: WriteBW, Size: -1},
		{Test: WriteBW, Iters: 4},
		{Test: WriteLat, QPs: 2},
		{Test: WriteBW, Duration: 1500 * time.Millisecond},
		{Test: WriteBW, Duration: time.Second, AllSizes: true},
		{Test: WriteBW, TxDepth: 20000},
	} {
		_, err := c.settings(Client)
		assert.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
	_, err := Dial(context.Background(), "127.0.0.1:1", nil, Config{Test: WriteBW})
	assert.ErrorIs(t, err, ErrConfig)
}

// TestDialRefused: a closed port fails the client without waiting long.
func TestDialRefused(t *testing.T) {
	ln, err := conn.Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Dial(ctx, addr, conn.NewPD(), Config{Test: WriteBW})
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded))
}

// TestServeClientGoneBeforeTestConnection: a client that leaves after the
// comm connection's first exchanges does not keep the server waiting for
// its test connection.
func TestServeClientGoneBeforeTestConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		_, err := Serve(ctx, ln, conn.NewPD(), Config{Test: WriteBW, Iters: 10})
		done <- err
	}()
	// A client that speaks the first five exchanges and then closes.
	c, err := newComm(conn.NewPD(), Client)
	require.NoError(t, err)
	require.NoError(t, c.qp.Connect(ctx, "tcp", ln.Addr().String()))
	p, err := NewProtocol(captureParams(WriteBW, Client))
	require.NoError(t, err)
	for p.Next().Kind == StepExchange {
		st := p.Next()
		in, err := c.exchange(ctx, st.What, st.Msg)
		require.NoError(t, err)
		require.NoError(t, p.Reply(in))
	}
	require.Equal(t, StepConnect, p.Next().Kind)
	c.close()
	start := time.Now()
	err = <-done
	require.ErrorContains(t, err, "waiting for the test connection")
	assert.Less(t, time.Since(start), 5*time.Second)
}
