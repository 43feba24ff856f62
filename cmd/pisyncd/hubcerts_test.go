package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHubCertsKeepsCA: `hub certs DIR --hosts ...` over a folder that held
// a CA replaced it (only route.secret was kept), and after the hub's
// restart every workstation refused it. Now it refuses, names the files
// and the ways out, and writes nothing; --renew issues a hub certificate
// from the CA, which stays; --force replaces the CA.
func TestHubCertsKeepsCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var out bytes.Buffer
	if err := certsCommand([]string{dir, "--hosts", "hub.lan,127.0.0.1"}, &out); err != nil {
		t.Fatal(err)
	}
	read := func(n string) []byte {
		b, _ := os.ReadFile(filepath.Join(dir, n))
		return b
	}
	ca, cert := read("ca.pem"), read("hub.pem")

	out.Reset()
	err := certsCommand([]string{dir, "--hosts", "hub.lan"}, &out)
	if err == nil || !strings.Contains(err.Error(), "ca.pem ca-key.pem") || !strings.Contains(err.Error(), "--renew") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("certs over a CA: %v\n%s", err, out.String())
	}
	if !bytes.Equal(read("ca.pem"), ca) || !bytes.Equal(read("hub.pem"), cert) {
		t.Fatal("certs over a CA replaced it")
	}

	out.Reset()
	if err := certsCommand([]string{"--renew", dir}, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read("ca.pem"), ca) || bytes.Equal(read("hub.pem"), cert) {
		t.Error("--renew: the CA must stay and the hub certificate change")
	}
	if !strings.Contains(out.String(), "new hub certificate for [hub.lan 127.0.0.1]") || !strings.Contains(out.String(), "the CA (ca.pem) is unchanged") {
		t.Errorf("--renew says:\n%s", out.String())
	}

	var usage *usageError
	if err := certsCommand([]string{dir, "--renew", "--force", "--hosts", "h"}, &out); !errors.As(err, &usage) {
		t.Errorf("--renew --force: %v, want a usage error", err)
	}
	out.Reset()
	if err := certsCommand([]string{dir, "--hosts", "hub.lan", "--force"}, &out); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(read("ca.pem"), ca) || !strings.Contains(out.String(), "copy the new ca.pem to every workstation") {
		t.Errorf("--force kept the CA, or does not say what to do:\n%s", out.String())
	}
}

// writeCert writes a self-signed certificate valid from notBefore to
// notAfter to path.
func writeCert(t *testing.T, path string, notBefore, notAfter time.Time) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hub"}, NotBefore: notBefore, NotAfter: notAfter,
		BasicConstraintsValid: true, IsCA: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHubStartHintsCertExpiry: the development CA and hub certificate are
// valid a year, and a hub started with one expired (or about to) said
// nothing, while every workstation refused it. Now it warns at start,
// with the date and `hub certs --renew`.
func TestHubStartHintsCertExpiry(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	cfg := &config.Hub{NodesDir: "n", TLSCert: filepath.Join(dir, "hub.pem"), TLSKey: filepath.Join(dir, "hub-key.pem"), TLSCA: filepath.Join(dir, "ca.pem")}
	// The CA's key beside them, as `hub certs` leaves it: --renew reads it.
	if err := os.WriteFile(filepath.Join(dir, "ca-key.pem"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name              string
		notBefore, notAft time.Time
		want              string
	}{
		{"valid", now.Add(-time.Hour), now.AddDate(0, 6, 0), ""},
		{"expiring", now.Add(-time.Hour), now.Add(10*24*time.Hour + time.Hour), "expires on " + now.Add(10*24*time.Hour+time.Hour).UTC().Format(time.DateOnly)},
		{"expired", now.AddDate(-1, 0, 0), now.Add(-time.Hour), "expired on " + now.Add(-time.Hour).UTC().Format(time.DateOnly)},
		{"not yet valid", now.Add(time.Hour), now.AddDate(1, 0, 0), "is not valid before"},
	} {
		writeCert(t, cfg.TLSCert, c.notBefore, c.notAft)
		writeCert(t, cfg.TLSCA, now.Add(-time.Hour), now.AddDate(5, 0, 0))
		h := hubStartHints(cfg, 1)
		if c.want == "" {
			if len(h) != 0 {
				t.Errorf("%s: %q", c.name, h)
			}
			continue
		}
		if len(h) != 1 || !strings.Contains(h[0], "the hub's certificate "+cfg.TLSCert) || !strings.Contains(h[0], c.want) || !strings.Contains(h[0], "pisyncd hub certs "+dir+" --renew") {
			t.Errorf("%s: %q, want one hint saying %q and --renew", c.name, h, c.want)
		}
	}
	// A certificate kept apart from the CA's folder: the renewal is run
	// in the CA's folder, and its files copied over (it named the
	// certificate's folder, where --renew finds no CA).
	apart := t.TempDir()
	moved := *cfg
	moved.TLSCert, moved.TLSKey = filepath.Join(apart, "hub.pem"), filepath.Join(apart, "hub-key.pem")
	writeCert(t, moved.TLSCert, now.AddDate(-1, 0, 0), now.Add(-time.Hour))
	if h := hubStartHints(&moved, 1); len(h) != 1 || !strings.Contains(h[0], "pisyncd hub certs "+dir+" --renew` in the folder of the CA") ||
		!strings.Contains(h[0], "copy the hub.pem and hub-key.pem it writes there to "+moved.TLSCert+" and "+moved.TLSKey) {
		t.Errorf("a certificate apart from its CA: %q", h)
	}
	// The CA too, whose end is every certificate's.
	writeCert(t, cfg.TLSCert, now.Add(-time.Hour), now.AddDate(0, 6, 0))
	writeCert(t, cfg.TLSCA, now.AddDate(-1, 0, 0), now.Add(5*24*time.Hour))
	if h := hubStartHints(cfg, 1); len(h) != 1 || !strings.Contains(h[0], "the CA "+cfg.TLSCA) || !strings.Contains(h[0], "--force") {
		t.Errorf("CA expiring: %q", h)
	}
}

// TestHubStartHintsKeyReadable: a workstation's nkey seed readable by
// others is warned about at start; the hub's TLS key and the CA's key were
// not. Now they are.
func TestHubStartHintsKeyReadable(t *testing.T) {
	dir := t.TempDir()
	if err := embedded.GenerateDevCerts(dir, []string{"localhost"}); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Hub{NodesDir: "n", TLSCert: filepath.Join(dir, "hub.pem"), TLSKey: filepath.Join(dir, "hub-key.pem"), TLSCA: filepath.Join(dir, "ca.pem")}
	if h := hubStartHints(cfg, 1); len(h) != 0 {
		t.Errorf("keys 0600: %q", h)
	}
	os.Chmod(cfg.TLSKey, 0o640)
	os.Chmod(filepath.Join(dir, "ca-key.pem"), 0o604)
	h := hubStartHints(cfg, 1)
	if len(h) != 2 || !strings.Contains(h[0], "the hub's TLS key file "+cfg.TLSKey+" is readable by others; chmod 600 it") ||
		!strings.Contains(h[1], "the CA's key file "+filepath.Join(dir, "ca-key.pem")+" is readable by others; chmod 600 it") {
		t.Errorf("keys readable by others: %q", h)
	}
}

// expireHubCert replaces the hub certificate in dir with one of the same
// CA and key whose validity ended an hour ago.
func expireHubCert(t *testing.T, dir string) {
	t.Helper()
	ca, err := embedded.ReadCert(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := embedded.ReadCert(filepath.Join(dir, "hub.pem"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	blk, _ := pem.Decode(b)
	caKey, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := *old
	tmpl.NotBefore, tmpl.NotAfter = time.Now().AddDate(-1, 0, 0), time.Now().Add(-time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca, old.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hub.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHintHubCertExpired: a workstation whose hub's certificate had
// expired logged the x509 error every second (it holds the current time,
// so it never counted as repeated) and no hint. Now one hint says to check
// the clock or renew the certificate, and the error is logged once a
// minute.
func TestHintHubCertExpired(t *testing.T) {
	h := startSecureHub(t)
	expireHubCert(t, h.certs)
	seed := h.addNode("ann", "red")
	h.run()
	cfg := stationConfig(t, "ann", "tls://localhost:"+portOnly(h.leaf))
	cfg.HubNkey, cfg.HubCA = seed, filepath.Join(h.certs, "ca.pem")
	_, log := loggedStation(t, cfg)
	waitHint(t, log, `msg="hint: the hub's certificate is not valid at this machine's time`, "certificate has expired or is not yet valid", 1)
	time.Sleep(3500 * time.Millisecond) // three more attempts
	if n := strings.Count(log.String(), "certificate has expired or is not yet valid: current time"); n != 1 {
		t.Errorf("the handshake error logged %d times in 3.5 s:\n%s", n, log.String())
	}
}

// TestHubFileMissing: a hub whose TLS or route secret setting names no file
// stops at start naming the setting, the path and the fix. Before,
// nats-server's parse error of the generated hub.conf said it, with that
// file's line numbers.
func TestHubFileMissing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nonexistent.pem")
	for _, c := range []struct {
		set  func(*config.Hub)
		want string
	}{
		{func(h *config.Hub) { h.TLSCert = missing }, "PISYNC_HUB_TLS_CERT " + missing + ": no such file: make the hub's certificates with `pisyncd hub certs DIR`"},
		{func(h *config.Hub) { h.TLSCA = missing }, "PISYNC_HUB_TLS_CA " + missing + ": no such file"},
		{func(h *config.Hub) { h.RouteSecret = missing }, "PISYNC_HUB_ROUTE_SECRET " + missing + ": no such file: `pisyncd hub certs DIR` writes route.secret"},
	} {
		h := &config.Hub{StateDir: dir}
		c.set(h)
		if err := hubFilesReadable(h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if err := hubFilesReadable(&config.Hub{StateDir: dir, NodesDir: filepath.Join(dir, "nodes")}); err != nil {
		t.Errorf("a nodes dir not made yet: %v", err)
	}
}

// TestHubFileNotAFile: a named pipe or a folder where the hub wants a file
// stops its start at once, naming the setting; a pipe made the start wait
// for a writer for ever, deaf to one SIGTERM (a probe). The check runs under
// a deadline (testenv.Within), so a hang fails the test, not the run.
func TestHubFileNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	nodes := filepath.Join(dir, "nodes")
	os.MkdirAll(nodes, 0o700)
	if err := syscall.Mkfifo(filepath.Join(nodes, "ws.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		h    *config.Hub
		want string
	}{
		{&config.Hub{StateDir: dir, TLSCert: fifo, TLSKey: fifo}, "PISYNC_HUB_TLS_CERT " + fifo + " is not a file (a pipe)"},
		{&config.Hub{StateDir: dir, RouteSecret: fifo}, "PISYNC_HUB_ROUTE_SECRET " + fifo + " is not a file (a pipe)"},
		{&config.Hub{StateDir: dir, TLSCA: dir}, "PISYNC_HUB_TLS_CA " + dir + " is not a file (a folder)"},
		{&config.Hub{StateDir: dir, NodesDir: nodes}, "PISYNC_HUB_NODES_DIR " + filepath.Join(nodes, "ws.json") + " is not a file (a pipe)"},
	} {
		var err error
		testenv.Within(t, 10*time.Second, "hubFilesReadable", func() { err = hubFilesReadable(c.h) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestHubKeyPairMismatch: a hub given a certificate and a key that are not
// a pair (the CA's key for the hub's, two files swapped) stops at start
// naming both settings and the files to give them, where nats-server's
// parse error of the generated hub.conf named neither.
func TestHubKeyPairMismatch(t *testing.T) {
	dir := t.TempDir()
	if err := certsCommand([]string{dir, "--hosts", "localhost"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	cert, key, caKey := filepath.Join(dir, "hub.pem"), filepath.Join(dir, "hub-key.pem"), filepath.Join(dir, "ca-key.pem")
	for _, c := range []struct{ cert, key string }{{cert, caKey}, {key, cert}, {filepath.Join(dir, "ca.pem"), key}} {
		err := hubFilesReadable(&config.Hub{StateDir: dir, TLSCert: c.cert, TLSKey: c.key})
		want := "PISYNC_HUB_TLS_CERT " + c.cert + " and PISYNC_HUB_TLS_KEY " + c.key + " are not the hub's certificate and its key"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "hub.pem and hub-key.pem") {
			t.Errorf("cert %s, key %s: %v, want %q", filepath.Base(c.cert), filepath.Base(c.key), err, want)
		}
	}
	if err := hubFilesReadable(&config.Hub{StateDir: dir, TLSCert: cert, TLSKey: key}); err != nil {
		t.Errorf("the pair: %v", err)
	}
}
