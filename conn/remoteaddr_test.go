package conn

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRemoteAddr_WireEncoding(t *testing.T) {
	a := RemoteAddr{STag: 0x01020304, TO: 0x1122334455667788}
	b := AppendRemoteAddr([]byte{0xff}, a)
	require.Equal(t, []byte{0xff, 1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}, b)
	got, rest, err := ParseRemoteAddr(append(b[1:], 9))
	require.NoError(t, err)
	require.Equal(t, a, got)
	require.Equal(t, []byte{9}, rest)
	_, _, err = ParseRemoteAddr(b[1:12])
	require.Error(t, err)
	require.Equal(t, "0x01020304@0x1122334455667788", a.String())
}

func FuzzParseRemoteAddr(f *testing.F) {
	f.Add(AppendRemoteAddr(nil, RemoteAddr{STag: 7, TO: 9}))
	f.Add([]byte{1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, rest, err := ParseRemoteAddr(b)
		if err != nil {
			return
		}
		if got := AppendRemoteAddr(nil, a); string(got) != string(b[:RemoteAddrLen]) || len(rest) != len(b)-RemoteAddrLen {
			t.Fatalf("round trip of % x: % x", b, got)
		}
	})
}

// A program tells its peer where to write in a Send: the peer parses the
// address and needs nothing but package conn.
func ExampleAppendRemoteAddr() {
	pd := NewPD()
	mr, _ := pd.Register(make([]byte, 4096), LocalWrite|RemoteWrite, ZeroBased())
	msg := AppendRemoteAddr(nil, mr.Remote(128)) // the payload of a Send
	addr, _, _ := ParseRemoteAddr(msg)           // at the peer
	fmt.Println(len(msg), addr.TO)
	mr.Deregister()
	// Output: 12 128
}
