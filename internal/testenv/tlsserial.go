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

// ServedCertSerial is the serial number of the certificate a NATS listener
// at addr (a hub's leaf or client port) presents to a client that trusts
// the CA in caFile and asks for "localhost": NATS sends its INFO in clear,
// then the TLS handshake follows, as a workstation's link makes it.
func ServedCertSerial(tb testing.TB, addr, caFile string) *big.Int {
	tb.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		tb.Fatalf("no certificate in %s", caFile)
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil { // INFO
		tb.Fatal(err)
	}
	tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err := tc.Handshake(); err != nil {
		tb.Fatalf("TLS with %s: %v", addr, err)
	}
	return tc.ConnectionState().PeerCertificates[0].SerialNumber
}
