package stag

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAccess_String(t *testing.T) {
	cases := map[Access]string{
		0:                                   "none",
		LocalRead:                           "LocalRead",
		LocalWrite | RemoteWrite:            "LocalWrite|RemoteWrite",
		allAccess:                           "LocalRead|LocalWrite|RemoteRead|RemoteWrite|RemoteAtomic|MWBind",
		RemoteRead | 0x80:                   "RemoteRead|0x80",
		0x30:                                "RemoteAtomic|MWBind",
		0x50:                                "RemoteAtomic|0x40",
		LocalRead | LocalWrite | RemoteRead: "LocalRead|LocalWrite|RemoteRead",
	}
	for a, want := range cases {
		require.Equal(t, want, a.String(), "%#x", uint8(a))
	}
}

func TestAccess_Has(t *testing.T) {
	a := LocalRead | RemoteRead
	require.True(t, a.Has(LocalRead))
	require.True(t, a.Has(LocalRead|RemoteRead))
	require.True(t, a.Has(0))
	require.False(t, a.Has(RemoteWrite))
	require.False(t, a.Has(LocalRead|LocalWrite))
}

// Verbs rule: a region writable by the peer must be writable locally.
func TestAccess_Validate_RemoteWriteNeedsLocalWrite(t *testing.T) {
	require.ErrorIs(t, RemoteWrite.Validate(), ErrBadAccess)
	require.ErrorIs(t, (LocalRead | RemoteWrite).Validate(), ErrBadAccess)
	require.NoError(t, (LocalWrite | RemoteWrite).Validate())
	require.ErrorIs(t, Access(0).Validate(), ErrBadAccess)
	require.ErrorIs(t, (LocalRead | 0x40).Validate(), ErrBadAccess)
	require.ErrorIs(t, (LocalRead | RemoteAtomic).Validate(), ErrBadAccess)
	require.NoError(t, (LocalWrite | RemoteAtomic).Validate())
	for a := Access(1); a <= allAccess; a++ {
		if (a.Has(RemoteWrite) || a.Has(RemoteAtomic)) && !a.Has(LocalWrite) {
			continue
		}
		require.NoError(t, a.Validate(), "%v", a)
	}
}
