package bench

import (
	"context"
	"crypto/tls"
	"net"
)

// The raw TLS baseline: with Config.TLS the CompareTCP phases run over
// crypto/tls streams on loopback TCP, the same messages as the raw TCP
// baseline, so that TLS iWARP is measured beside what Go's TLS alone
// costs on the same machine. The TLS stream seals each Write into records
// of its own; the messages of the baseline are written whole, as iwarp-go
// hands its FPDU batches to TLS.

// streamPair connects the two ends of a baseline stream: loopback TCP, and
// inside TLS with cfg.TLS (both handshakes done).
func (cfg *Config) streamPair(ctx context.Context) (client, server net.Conn, err error) {
	c, s, err := tcpPair(ctx)
	if err != nil || cfg.TLS == nil {
		return c, s, err
	}
	ccfg := cfg.TLS.Clone()
	if ccfg.ServerName == "" {
		ccfg.ServerName = "127.0.0.1" // what tcpPair dials
	}
	tc, ts := tls.Client(c, ccfg), tls.Server(s, cfg.TLS)
	done := make(chan error, 1)
	go func() { done <- ts.HandshakeContext(ctx) }()
	err = tc.HandshakeContext(ctx)
	if serr := <-done; err == nil {
		err = serr
	}
	if err != nil {
		c.Close()
		s.Close()
		return nil, nil, err
	}
	return tc, ts, nil
}

// closeWrite ends c's sending half: a FIN on TCP, a close_notify alert
// inside TLS; either way the reader sees io.EOF.
func closeWrite(c net.Conn) error {
	return c.(interface{ CloseWrite() error }).CloseWrite()
}
