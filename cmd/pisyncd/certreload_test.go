package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

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

	trust := testenv.TrustCA(t, ca, "localhost")
	old := testenv.ServedCertSerial(t, h.leaf, trust)
	renewed, err := embedded.RenewHubCert(h.certs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if renewed.SerialNumber.Cmp(old) == 0 {
		t.Fatal("the renewed certificate has the old serial")
	}
	if got := testenv.ServedCertSerial(t, h.leaf, trust); got.Cmp(old) != 0 {
		t.Fatalf("before the reload the hub serves serial %v, want the old %v", got, old)
	}
	if err := reloadHub(context.Background(), h.srv, h.cfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if got := testenv.ServedCertSerial(t, h.leaf, trust); got.Cmp(renewed.SerialNumber) != 0 {
		t.Fatalf("after the reload the hub serves serial %v, want the renewed %v (old %v)", got, renewed.SerialNumber, old)
	}
	writeSession(t, a, "cert2-session", 2)
	waitFile(t, b, "cert2-session", 3)
}
