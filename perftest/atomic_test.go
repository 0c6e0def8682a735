package perftest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// atomic_bw and atomic_lat between two iwarp-go sides (siw implements no
// RFC 7306 atomics, so there is no siw pair): 8-byte FetchAdds or
// CmpSwaps, whatever -s says, reported like read_bw and read_lat.
func TestLoopbackAtomics(t *testing.T) {
	for _, test := range AtomicTests() {
		for _, at := range []AtomicType{FetchAndAdd, CmpAndSwap} {
			t.Run(fmt.Sprintf("%v/%v", test, at), func(t *testing.T) {
				r := runPair(t, Config{Test: test, Atomic: at, Size: 4096, Iters: 100})
				requireOK(t, r)
				require.Len(t, r.client, 1)
				assert.Contains(t, r.clientOut, "Atomic ")
				assert.Contains(t, r.clientOut, "Outstand reads")
				if test == AtomicBW {
					c, s := r.client[0].BW, r.server[0].BW
					assert.Equal(t, uint64(atomicSize), c.Size)
					assert.Equal(t, uint64(100), c.Iters)
					assert.Greater(t, c.BWAvg, 0.0)
					assert.Equal(t, *c, *s, "the server prints the client's report")
				} else {
					c := r.client[0].Lat
					assert.Equal(t, uint64(atomicSize), c.Size)
					assert.Equal(t, uint64(100), c.Iters)
					assert.Greater(t, c.TTypical, 0.0)
					assert.Empty(t, r.server, "the atomic_lat server measures nothing")
				}
			})
		}
	}
}

func TestAtomicConfig(t *testing.T) {
	for _, s := range []string{"FETCH_AND_ADD", "CMP_AND_SWAP"} {
		a, err := ParseAtomicType(s)
		require.NoError(t, err)
		require.Equal(t, s, a.String())
	}
	_, err := ParseAtomicType("SWAP")
	require.Error(t, err)
	for _, s := range []string{"atomic_bw", "ib_atomic_lat"} {
		test, err := ParseTest(s)
		require.NoError(t, err)
		require.True(t, test.valid())
	}
	_, err = (&Config{Test: AtomicBW, AllSizes: true}).settings(Client)
	require.ErrorIs(t, err, ErrConfig)
}
