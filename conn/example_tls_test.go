package conn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log"
	"math/big"
	"net"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Two iwarp-go peers run iWARP inside TLS: the listener takes a server
// configuration, Connect a client configuration, and everything above
// setup is unchanged. Here the listener also requires a client
// certificate, and the accepted queue pair shows whose it is.
func ExampleWithTLS() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	serverCert, clientCert, roots := exampleCertificates()

	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0", conn.WithTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    roots,
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	spd := conn.NewPD()
	sqp, _ := spd.NewQP(conn.NewCQ(16), conn.QPCaps{})
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(ctx, sqp) }()

	cqp, _ := conn.NewPD().NewQP(conn.NewCQ(16), conn.QPCaps{})
	err = cqp.Connect(ctx, "tcp", ln.Addr().String(), conn.WithTLS(&tls.Config{
		Certificates: []tls.Certificate{clientCert},
		RootCAs:      roots,
	}))
	if err != nil {
		log.Fatal(err)
	}
	if err := <-accepted; err != nil {
		log.Fatal(err)
	}
	cs, _ := cqp.TLSState()
	ss, _ := sqp.TLSState()
	fmt.Println("client sees:", cs.PeerCertificates[0].Subject.CommonName)
	fmt.Println("server sees:", ss.PeerCertificates[0].Subject.CommonName)
	cqp.Close()
	sqp.Close()
	// Output:
	// client sees: example server
	// server sees: example client
}

// exampleCertificates makes two self-signed certificates for 127.0.0.1 and
// a pool that trusts both. A real deployment loads its own.
func exampleCertificates() (server, client tls.Certificate, roots *x509.CertPool) {
	roots = x509.NewCertPool()
	make1 := func(name string, serial int64) tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			log.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
			IsCA:         true, BasicConstraintsValid: true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			log.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(der)
		roots.AddCert(leaf)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	}
	return make1("example server", 1), make1("example client", 2), roots
}
