package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/units"
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
		ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0", append(ConnOptions(cfg.CRC), cfg.Options...)...)
		if err != nil {
			return Result{}, err
		}
		sctx, cancel := context.WithCancel(ctx)
		srvDone := make(chan error, 1)
		log := cfg.Log
		if log == nil {
			log = io.Discard
		}
		// Room for every queue pair of a run's bandwidth phase and of the
		// run's before it, whose sessions may still be ending.
		srv := ServeConfig{Log: log, MaxSessions: max(DefaultMaxSessions, 2*cfg.qps()+2)}
		go func() { srvDone <- Serve(sctx, ln, srv) }()
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
	rd, err := rdmaBench(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	res := Result{Op: cfg.Op, Size: cfg.Size, CRC: cfg.CRC, Window: cfg.Window, LatIters: len(rd.lat), Setup: rd.setup, Repeat: 1, QPs: cfg.qps()}
	res.Messages, res.Bytes, res.Seconds, res.Gbps, res.MsgRate, res.LatP50us, res.LatP99us = fillPhase(rd.bw, rd.lat)
	res.LatSlowPct = units.SlowShare(rd.lat) // fillPhase sorted the samples
	res.TLS = cfg.TLS != nil
	res.FPDUsReceived, res.CRCCheckedFPDUs, res.CRCErrors = rd.crc.fpdus, rd.crc.checked, rd.crc.errors
	if cfg.CRC {
		res.Setup += "; " + rd.crc.describe()
	}
	if res.LatCPUus = rd.latCPU; res.LatCPUus != nil {
		res.LatCPUScope = "client"
		if cfg.Loopback {
			res.LatCPUScope = "process: client and server"
		}
	}
	res.ServerLatCPUus = rd.serverLatCPU
	res.BwCPUnsPerMiB = rd.bw.cpuPerMiB()
	if !cfg.CompareTCP {
		fillMeasures(&res, cfg.Loopback)
		return res, nil
	}
	tr, err := tcpBench(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	var t Result
	t.Messages, t.Bytes, t.Seconds, t.Gbps, t.MsgRate, t.LatP50us, t.LatP99us = fillPhase(tr.bw, tr.lat)
	res.TCPMessages, res.TCPBytes, res.TCPSeconds = &t.Messages, &t.Bytes, &t.Seconds
	res.TCPGbps, res.TCPMsgRate = &t.Gbps, &t.MsgRate
	if len(tr.lat) > 0 {
		res.TCPLatP50us, res.TCPLatP99us = &t.LatP50us, &t.LatP99us
		res.TCPLatSlowPct = ptr(units.SlowShare(tr.lat))
		res.TCPLatCPUus = tr.latCPU
	}
	if t.Gbps > 0 {
		res.Ratio = ptr(res.Gbps / t.Gbps)
	}
	res.TCPBwCPUnsPerMiB = tr.bw.cpuPerMiB()
	res.BwCPURatio = quotient(res.BwCPUnsPerMiB, res.TCPBwCPUnsPerMiB)
	if cfg.CRC {
		var c Result
		_, _, _, c.Gbps, c.MsgRate, _, _ = fillPhase(tr.crc, nil)
		res.TCPCRCGbps, res.TCPCRCMsgRate = &c.Gbps, &c.MsgRate
		if c.Gbps > 0 {
			res.TCPCRCRatio = ptr(res.Gbps / c.Gbps)
		}
		res.TCPCRCBwCPUnsPerMiB = tr.crc.cpuPerMiB()
		res.CRCBwCPURatio = quotient(res.BwCPUnsPerMiB, res.TCPCRCBwCPUnsPerMiB)
	}
	if len(rd.lat) > 0 && t.LatP50us > 0 {
		res.LatRatio = ptr(res.LatP50us / t.LatP50us)
	}
	if len(rd.lat) > 0 && t.LatP99us > 0 {
		res.LatP99Ratio = ptr(res.LatP99us / t.LatP99us)
	}
	fillMeasures(&res, cfg.Loopback)
	return res, nil
}
