package conn

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/stretchr/testify/require"
)

// TestOptions_Validate: options refuse out-of-range values.
func TestOptions_Validate(t *testing.T) {
	for _, o := range []Option{
		WithIRDORD(3, 1), WithIRDORD(256, 1), WithIRDORD(0, 1),
		WithMPARevision(3), WithCRC(CRCMode(9)), WithP2P(0), WithPeerIRD(0),
		WithMaxFPDU(10), WithTCPUserTimeout(-1), WithSetupTimeout(0), WithFirstFPDUDelay(-1), WithResponderSendFirst(0),
		WithPrivateData(make([]byte, 600)),
	} {
		_, err := buildConfig(defaultConfig(), []Option{o})
		require.ErrorIs(t, err, ErrBadOption)
	}
	// Toward a peer that may be siw, private data is limited to 251 bytes
	// including iwarp-go's 8-byte trailer.
	c, err := buildConfig(defaultConfig(), []Option{WithPrivateData(make([]byte, 243))})
	require.NoError(t, err)
	require.Len(t, appendPeerTrailer(c.privateData), 251)
}

// TestOptions_SiwPrivateDataLimit: toward a peer that may be siw, private
// data that would not survive siw's 8-bit length arithmetic is refused
// before anything is sent, with an error that says why.
func TestOptions_SiwPrivateDataLimit(t *testing.T) {
	checkLeaks(t)
	a, b := net.Pipe()
	defer b.Close()
	ep := newEndpoint(t, QPCaps{})
	err := ep.qp.Client(context.Background(), a, WithPrivateData(make([]byte, 244)))
	require.ErrorIs(t, err, mpa.ErrSiwLimit)
	require.Contains(t, err.Error(), "244 bytes of private data")
	require.Contains(t, err.Error(), "WithoutPeerTrailer")

	// Without the trailer the full 251 bytes go out, and no more.
	a2, b2 := net.Pipe()
	defer b2.Close()
	got := make(chan []byte, 1)
	go func() {
		f, err := mpa.ReadFrame(b2, mpa.MaxPrivateData)
		if err != nil {
			got <- nil
			return
		}
		got <- f.PrivateData
		b2.Close()
	}()
	ep2 := newEndpoint(t, QPCaps{})
	ep2.qp.Client(context.Background(), a2, WithoutPeerTrailer(), WithPrivateData(bytes.Repeat([]byte{7}, 251)))
	require.Equal(t, bytes.Repeat([]byte{7}, 251), <-got)
	ep3 := newEndpoint(t, QPCaps{})
	a3, b3 := net.Pipe()
	defer b3.Close()
	require.ErrorIs(t, ep3.qp.Client(context.Background(), a3, WithoutPeerTrailer(), WithPrivateData(make([]byte, 252))), mpa.ErrSiwLimit)
}
