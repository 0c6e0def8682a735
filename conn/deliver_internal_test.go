package conn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInsideDeliver_NamesTheDeliverFunction(t *testing.T) {
	require.Equal(t, "github.com/iwarp-go/iwarp-go/conn.(*QP).deliver", deliverName)
	require.False(t, insideDeliver())
}
