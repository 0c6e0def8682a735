package bench

import (
	"bytes"
	"math"
	"testing"
)

// Property: a session request the server accepts is within its bounds and
// encodes back to the same bytes; anything else is refused without a
// panic. Replies likewise.
func FuzzParseSession(f *testing.F) {
	f.Add(AppendSession(nil, Session{Phase: PhaseBandwidth, Op: 's', Final: true, Size: 4096, Window: 64, Credits: 128, Batch: 32}))
	f.Add(AppendSession(nil, Session{Phase: PhaseLatency, Op: 'w', Size: 64, Window: 1,
		Region: Region{TO: math.MaxUint64 - 63, STag: 1, Len: 64}}))
	f.Add(AppendReply(nil, Region{TO: 0x1000, STag: 7, Len: 100}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := ParseReply(b); err == nil && !bytes.Equal(AppendReply(nil, r), b) {
			t.Fatalf("reply round trip: %x", b)
		}
		s, err := ParseSession(b)
		if err != nil {
			return
		}
		if s.Size < 1 || s.Size > MaxSize || s.Window < 1 || s.Window > MaxWindow || s.Credits > maxCredits || s.Batch > s.Credits {
			t.Fatalf("accepted out of bounds: %+v", s)
		}
		if s.writesBack() && (s.Region.Len < s.Size || s.Region.TO > math.MaxUint64-uint64(s.Size)+1) {
			t.Fatalf("accepted a region the server cannot write: %+v", s)
		}
		// Flag bits other than final are not kept.
		want := bytes.Clone(b)
		want[7] &= sessionFinal
		if got := AppendSession(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("round trip: %x → %x", b, got)
		}
	})
}

// Property: a report the client accepts encodes back to the same bytes.
func FuzzParseReport(f *testing.F) {
	f.Add(AppendReport(nil, Report{CRC: true, FPDUs: 16384, CPU: 3e9, CPUKnown: true, RoundTrips: 20000}))
	f.Add(AppendReport(nil, Report{}))
	f.Add(AppendSession(nil, Session{Phase: PhaseLatency, Op: 's', Size: 8, Window: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReport(b)
		if err != nil {
			return
		}
		if r.CPU < 0 || (!r.CPUKnown && r.CPU != 0) {
			t.Fatalf("accepted CPU time %v (known %v)", r.CPU, r.CPUKnown)
		}
		if got := AppendReport(nil, r); !bytes.Equal(got, b) {
			t.Fatalf("round trip: %x → %x", b, got)
		}
	})
}
