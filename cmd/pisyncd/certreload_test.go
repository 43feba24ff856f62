package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// servedSerial is the serial number of the certificate a hub listener at
// addr presents: NATS sends its INFO in clear, then the TLS handshake
// follows, as a workstation's leaf connection makes it.
func servedSerial(t *testing.T, addr, caFile string) *big.Int {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS with the hub at %s: %v", addr, err)
	}
	return tc.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestHubReloadRenewsCert: a hub certificate renewed in place (`hub certs
// DIR --renew`) is served after `hub reload` (or SIGHUP), without a restart:
// new connections get the new certificate, and the workstations linked
// before it go on replicating.
func TestHubReloadRenewsCert(t *testing.T) {
	h := startSecureHub(t)
	seedA, seedB := h.addNode("ws-a", "red"), h.addNode("ws-b", "red")
	h.run()
	ca := filepath.Join(h.certs, "ca.pem")
	a := newSecureStation(t, h, "ws-a", seedA, ca)
	b := newSecureStation(t, h, "ws-b", seedB, ca)
	writeSession(t, a, "cert1-session", 2)
	waitFile(t, b, "cert1-session", 3)

	old := servedSerial(t, h.leaf, ca)
	renewed, err := embedded.RenewHubCert(h.certs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if renewed.SerialNumber.Cmp(old) == 0 {
		t.Fatal("the renewed certificate has the old serial")
	}
	if got := servedSerial(t, h.leaf, ca); got.Cmp(old) != 0 {
		t.Fatalf("before the reload the hub serves serial %v, want the old %v", got, old)
	}
	if err := reloadHub(context.Background(), h.srv, h.cfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, h.leaf, ca); got.Cmp(renewed.SerialNumber) != 0 {
		t.Fatalf("after the reload the hub serves serial %v, want the renewed %v (old %v)", got, renewed.SerialNumber, old)
	}
	writeSession(t, a, "cert2-session", 2)
	waitFile(t, b, "cert2-session", 3)
}
