package stag

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFailure_String(t *testing.T) {
	seen := map[string]bool{}
	for f := OK; f < numFailures; f++ {
		s := f.String()
		require.NotEmpty(t, s)
		require.False(t, seen[s], "duplicate name %q", s)
		seen[s] = true
	}
	require.Equal(t, "Failure(200)", Failure(200).String())
	require.Equal(t, "tagged offset wrap", TOWrap.Error())
	require.Equal(t, "tagged offset wrap", fmt.Sprint(TOWrap))

	var err error = PDMismatch
	var f Failure
	require.True(t, errors.As(err, &f))
	require.Equal(t, PDMismatch, f)
}
