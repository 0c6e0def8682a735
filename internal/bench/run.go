package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Run measures cfg.Repeat times, each run a bandwidth phase and a latency
// phase of iwarp-go (and of raw TCP with cfg.CompareTCP), and returns the
// summary of the runs (CombineRuns).
func Run(ctx context.Context, cfg *Config) (Result, error) {
	c := *cfg
	cfg = &c
	if cfg.Repeat < 1 {
		cfg.Repeat = 1
	}
	if cfg.Loopback {
		ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0", ConnOptions(cfg.CRC)...)
		if err != nil {
			return Result{}, err
		}
		sctx, cancel := context.WithCancel(ctx)
		srvDone := make(chan error, 1)
		log := cfg.Log
		if log == nil {
			log = io.Discard
		}
		go func() { srvDone <- Serve(sctx, ln, ServeConfig{Log: log}) }()
		defer func() {
			cancel()
			ln.Close()
			<-srvDone
		}()
		cfg.Target = ln.Addr().String()
	}
	runs := make([]Result, 0, cfg.Repeat)
	for i := 0; i < cfg.Repeat; i++ {
		cfg.lastRun = i == cfg.Repeat-1 // its last session is marked final
		r, err := runOnce(ctx, cfg)
		if err != nil {
			if cfg.Repeat > 1 {
				err = fmt.Errorf("run %d of %d: %w", i+1, cfg.Repeat, err)
			}
			return Result{}, err
		}
		runs = append(runs, r)
	}
	return CombineRuns(runs), nil
}

// runOnce measures iwarp-go and, if asked, raw TCP right after it.
func runOnce(ctx context.Context, cfg *Config) (Result, error) {
	bw, lat, setup, err := rdmaBench(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	res := Result{Op: cfg.Op, Size: cfg.Size, CRC: cfg.CRC, Window: cfg.Window, LatIters: len(lat), Setup: setup, Repeat: 1}
	res.Messages, res.Bytes, res.Seconds, res.Gbps, res.MsgRate, res.LatP50us, res.LatP99us = fillPhase(bw, lat)
	if !cfg.CompareTCP {
		return res, nil
	}
	tbw, tlat, err := tcpBench(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	var t Result
	t.Messages, t.Bytes, t.Seconds, t.Gbps, t.MsgRate, t.LatP50us, t.LatP99us = fillPhase(tbw, tlat)
	res.TCPMessages, res.TCPBytes, res.TCPSeconds = &t.Messages, &t.Bytes, &t.Seconds
	res.TCPGbps, res.TCPMsgRate = &t.Gbps, &t.MsgRate
	if len(tlat) > 0 {
		res.TCPLatP50us, res.TCPLatP99us = &t.LatP50us, &t.LatP99us
	}
	if t.Gbps > 0 {
		r := res.Gbps / t.Gbps
		res.Ratio = &r
	}
	if len(lat) > 0 && t.LatP50us > 0 {
		r := res.LatP50us / t.LatP50us
		res.LatRatio = &r
	}
	return res, nil
}
