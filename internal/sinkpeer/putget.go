package sinkpeer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/units"
	"github.com/iwarp-go/iwarp-go/pmemsink"
)

// chunk is how much Put reads from its source and Get writes out at once.
const chunk = 1 << 20

// PeerConfig names a sink.
type PeerConfig struct {
	Addr string
	Port int
	// Options are added to the connection's (tests).
	Options []conn.Option
}

// dial connects to the target. GPSPM is used only when asked for
// (WithMethod(MethodGPSPM) posts its receive): toward a librpma server that
// does not answer it (examples 04, 05, 07) a GPSPM Send would end the
// connection, and toward an iwarp-go sink the Flush extension is better.
func (p PeerConfig) dial(ctx context.Context, opts ...pmemsink.InitiatorOption) (*pmemsink.Initiator, error) {
	opts = append(opts, pmemsink.WithConnOptions(p.Options...))
	return pmemsink.Dial(ctx, "tcp", net.JoinHostPort(p.Addr, strconv.Itoa(p.Port)), opts...)
}

// PutConfig is one run of Put.
type PutConfig struct {
	PeerConfig
	Offset uint64
	// AtDataOffset writes at the descriptor's data_offset instead of
	// Offset: where librpma's example servers print from.
	AtDataOffset bool
	Src          io.Reader
	// Method forces a flush method (MethodAuto: the best).
	Method pmemsink.Method
	// Persistent fails the put unless the sink declares the bytes
	// persistent.
	Persistent bool
	// Err receives the report: method, guarantee, time to durable.
	Err io.Writer
}

// Put writes everything Src holds into the sink's region from Offset, then
// flushes it, and reports how and how fast it became durable. The STag,
// base and size come from the sink's MPA Reply.
func Put(ctx context.Context, cfg PutConfig) error {
	in, err := cfg.dial(ctx, pmemsink.WithMethod(cfg.Method))
	if err != nil {
		return err
	}
	defer in.Close()
	if cfg.AtDataOffset {
		cfg.Offset = uint64(in.Remote().DataOffset)
	}
	buf := make([]byte, chunk)
	off, total := cfg.Offset, uint64(0)
	start := time.Now()
	for {
		n, rerr := io.ReadFull(cfg.Src, buf)
		if n > 0 {
			if err := in.Write(ctx, off, buf[:n]); err != nil {
				return fmt.Errorf("writing at offset %d (nothing flushed): %w", off, err)
			}
			off, total = off+uint64(n), total+uint64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("reading the input (nothing flushed): %w", rerr)
		}
	}
	written := time.Now()
	var fopts []pmemsink.FlushOption
	if cfg.Persistent {
		fopts = append(fopts, pmemsink.RequirePersistent())
	}
	res, err := in.Flush(ctx, cfg.Offset, total, fopts...)
	done := time.Now()
	if err != nil && !errors.Is(err, pmemsink.ErrNotPersistent) {
		return fmt.Errorf("flush: %w", err)
	}
	r := in.Remote()
	fmt.Fprintf(cfg.Err, "put: %s at offset %d of a %s region (STag %#08x): %v; durable %s after the first write (writes %s, flush %s)\n",
		units.Bytes(int64(total)), cfg.Offset, units.Bytes(int64(r.Size)), uint32(r.STag), res,
		units.Duration(done.Sub(start)), units.Duration(written.Sub(start)), units.Duration(done.Sub(written)))
	return err
}

// GetConfig is one run of Get.
type GetConfig struct {
	PeerConfig
	Offset, Length uint64
	// Out receives exactly Length bytes; Err the report.
	Out, Err io.Writer
}

// Get reads Length bytes of the sink's region from Offset and writes them
// to Out, and nothing else.
func Get(ctx context.Context, cfg GetConfig) error {
	in, err := cfg.dial(ctx)
	if err != nil {
		return err
	}
	defer in.Close()
	r := in.Remote()
	if cfg.Length > r.Size || cfg.Offset > r.Size-cfg.Length {
		return fmt.Errorf("[%d, +%d) is outside the target's %d-byte region", cfg.Offset, cfg.Length, r.Size)
	}
	buf := make([]byte, min(cfg.Length, chunk))
	start := time.Now()
	for off, left := cfg.Offset, cfg.Length; left > 0; {
		n := min(left, uint64(len(buf)))
		if err := in.Read(ctx, off, buf[:n]); err != nil {
			return err
		}
		if _, err := cfg.Out.Write(buf[:n]); err != nil {
			return err
		}
		off, left = off+n, left-n
	}
	declared := "the target declares no durability"
	if r.Declares(pmemsink.MethodReadAfterWrite) {
		declared = "the target declares its flushed bytes persistent"
	}
	fmt.Fprintf(cfg.Err, "get: %s at offset %d of a %s region (STag %#08x) in %s by RDMA Read; %s\n",
		units.Bytes(int64(cfg.Length)), cfg.Offset, units.Bytes(int64(r.Size)), uint32(r.STag), units.Duration(time.Since(start)), declared)
	return nil
}
