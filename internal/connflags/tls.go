package connflags

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/iwarp-go/iwarp-go/conn"
)

// TLS are the flags that run a command's connections inside TLS
// (conn.WithTLS), between iwarp-go peers only. One configuration serves
// both roles: --tls-cert and --tls-key are this end's certificate (a
// server's, or a client's for mutual authentication); --tls-ca is the CA
// that signs the peer's: a client trusts the server it signs, a server
// then requires every client to present a certificate it signs.
type TLS struct {
	Cert, Key, CA string
}

// Register adds --tls-cert, --tls-key and --tls-ca to fs.
func (t *TLS) Register(fs *flag.FlagSet) {
	fs.StringVar(&t.Cert, "tls-cert", "", "TLS: this end's certificate chain (PEM `file`); with --tls-key")
	fs.StringVar(&t.Key, "tls-key", "", "TLS: the private key of --tls-cert (PEM `file`)")
	fs.StringVar(&t.CA, "tls-ca", "", "TLS: the CA (PEM `file`) that signs the peer's certificate; a server then requires client certificates")
}

// Enabled reports whether any TLS flag was given.
func (t *TLS) Enabled() bool { return t.Cert != "" || t.Key != "" || t.CA != "" }

// Check refuses a certificate without its key and the reverse.
func (t *TLS) Check() error {
	if (t.Cert == "") != (t.Key == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	return nil
}

// Config loads the files into a configuration for either role; nil
// without TLS flags. server says the command listens, and so needs a
// certificate.
func (t *TLS) Config(server bool) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	if server && t.Cert == "" {
		return nil, errors.New("a TLS server needs --tls-cert and --tls-key")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if t.CA != "" {
		b, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", t.CA)
		}
		cfg.RootCAs = pool
		if t.Cert != "" {
			cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}

// Options is Config as connection options: WithTLS, or none.
func (t *TLS) Options(server bool) ([]conn.Option, error) {
	cfg, err := t.Config(server)
	if err != nil || cfg == nil {
		return nil, err
	}
	return []conn.Option{conn.WithTLS(cfg)}, nil
}
