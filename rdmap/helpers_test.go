package rdmap

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// mpaLikeErr stands for an error of the mpa package: any error whose chain
// holds a termcode.Code.
var mpaLikeErr = fmt.Errorf("mpa: bad CRC: %w", termcode.MPACRC)
