package testenv

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// TrustCA is a TLS client configuration that trusts only the CA in
// caFile and expects a certificate for serverName.
func TrustCA(tb testing.TB, caFile, serverName string) *tls.Config {
	tb.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		tb.Fatalf("no certificate in %s", caFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName}
}

// ServedCertSerial is the serial number of the certificate a NATS listener
// at addr (a hub's leaf or client port) presents to a client with the
// configuration tc: NATS sends its INFO in clear, then the TLS handshake
// follows, as a workstation's link makes it.
func ServedCertSerial(tb testing.TB, addr string, tc *tls.Config) *big.Int {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil { // INFO
		tb.Fatal(err)
	}
	conn := tls.Client(c, tc)
	if err := conn.Handshake(); err != nil {
		tb.Fatalf("TLS with %s: %v", addr, err)
	}
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}
