package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProgress(t *testing.T) {
	var p *Line
	p.Add(1) // a nil line does nothing
	p.Finish()
	require.Nil(t, Start(nil, "x", 10, 0))
	require.False(t, IsTerminal(&bytes.Buffer{}))

	old := Delay
	Delay = time.Millisecond
	defer func() { Delay = old }()
	var buf conntest.LockedBuffer
	p = Start(&buf, "write 4 KiB", 100, 0)
	p.Add(50)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "%") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	p.Finish()
	out := buf.String()
	require.Contains(t, out, "\rwrite 4 KiB:  50%, 50 messages")
	require.True(t, strings.HasSuffix(out, "\r\033[K"), "the line is cleared: %q", out)
}
