package main

import (
	"github.com/iwarp-go/iwarp-go/internal/bench"
	"github.com/iwarp-go/iwarp-go/internal/connflags"
	"github.com/iwarp-go/iwarp-go/internal/sinkpeer"
)

// tlsUsage describes the TLS flags, for usages written by hand.
const tlsUsage = `iWARP inside TLS, between iwarp-go peers only:
      --tls-cert FILE     this end's certificate (PEM), with --tls-key; a server needs one
      --tls-key FILE      its private key (PEM)
      --tls-ca FILE       the CA that signs the peer's certificate; a server then requires
                          client certificates
`

// tls registers --tls-cert, --tls-key and --tls-ca (connflags.TLS); parse
// checks that a certificate comes with its key.
func (f *flags) tls() *connflags.TLS {
	t := &connflags.TLS{}
	t.Register(f.FlagSet)
	f.checks = append(f.checks, t.Check)
	return t
}

// clientTLS adds the TLS flags' options to a put's or get's connection.
func clientTLS(f *flags, t *connflags.TLS, p *sinkpeer.PeerConfig) error {
	opts, err := t.Options(false)
	if err != nil {
		return f.bad("%v", err)
	}
	p.Options = append(p.Options, opts...)
	return nil
}

// baseline names the bench's baseline rows: raw TCP, or raw TLS streams
// when the run was inside TLS.
func baseline(r *bench.Result) string {
	if r.TLS {
		return "raw TLS"
	}
	return "raw TCP"
}
