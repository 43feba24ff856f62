package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// secureHub is a hub with TLS and registered nodes, as deployed.
type secureHub struct {
	*testHub
	certs, nodes, client string
	cfg                  *config.Hub
	log                  *testLogWriter // the hub's log, from run
}

// logs is what the hub has logged (warnings and errors).
func (h *secureHub) logs() string { return h.log.String() }

func startSecureHub(t *testing.T) *secureHub {
	dir := t.TempDir()
	h := &secureHub{testHub: &testHub{t: t, dir: filepath.Join(dir, "state"), leaf: testenv.FreeAddr(t)},
		certs: filepath.Join(dir, "certs"), nodes: filepath.Join(dir, "nodes"), client: testenv.FreeAddr(t)}
	if err := embedded.GenerateDevCerts(h.certs, []string{"localhost", "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	h.cfg = &config.Hub{
		Name: "hub-s", StateDir: h.dir, LeafListen: h.leaf, Listen: h.client, Replicas: 1, MaxStore: 1 << 30,
		NodesDir: h.nodes, TLSCert: filepath.Join(h.certs, "hub.pem"), TLSKey: filepath.Join(h.certs, "hub-key.pem"),
		TLSCA: filepath.Join(h.certs, "ca.pem"),
	}
	return h
}

func (h *secureHub) run() {
	h.log = &testLogWriter{t: h.t, prefix: "hub"}
	logger := slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := StartHub(context.Background(), h.cfg, logger)
	if err != nil {
		h.t.Fatalf("hub: %v", err)
	}
	h.srv = srv
	h.t.Cleanup(h.stop)
}

// operator is the hub's operator: JetStream over an admin connection to
// team's account, closed with the test.
func (h *secureHub) operator(t *testing.T, team string) jetstream.JetStream {
	t.Helper()
	nc, err := h.srv.ConnectTeam(team)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// addNode registers a node and returns the path of its seed file.
func (h *secureHub) addNode(name, team string) string {
	h.t.Helper()
	seed, err := embedded.AddNode(h.nodes, name, team)
	if err != nil {
		h.t.Fatal(err)
	}
	p := filepath.Join(h.t.TempDir(), name+".nkey")
	if err := os.WriteFile(p, seed, 0o600); err != nil {
		h.t.Fatal(err)
	}
	return p
}

func newSecureStation(t *testing.T, h *secureHub, name, seedFile, caFile string) *station {
	cfg := stationConfig(t, name, "tls://localhost:"+strings.Split(h.leaf, ":")[1])
	cfg.HubNkey, cfg.HubCA = seedFile, caFile
	return runStation(t, cfg)
}

func writeSession(t *testing.T, s *station, sid string, n int) string {
	p := filepath.Join(s.cfg.SessionsDir, "--sec--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	os.MkdirAll(filepath.Dir(p), 0o700)
	appendLine(t, p, hdrLine(sid, "/sec"))
	parent := ""
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d", sid[:4], i)
		appendLine(t, p, msgLine(id, parent, "secret"))
		parent = id
	}
	return p
}

func waitFile(t *testing.T, s *station, sid string, lines int) {
	t.Helper()
	p := filepath.Join(s.cfg.SessionsDir, "--sec--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		b, err := os.ReadFile(p)
		st, _ := s.d.status(t.Context())
		// Whole lines only: a long line may be read half written.
		return err == nil && bytes.HasSuffix(b, []byte("\n")) && len(splitLines(string(b))) == lines, fmt.Sprintf("%s: %v, %d lines; forwarder %+v replicator %+v tailer %+v", s.name, err, len(splitLines(string(b))), st.Forwarder, st.Replicator, st.Tailer)
	})
}

// TestSecureHub: TLS and per-node nkeys on the hub. Registered nodes of a
// team replicate; another team sees nothing of it; a node cannot publish
// as another; unauthenticated clients and a wrong CA are refused.
func TestSecureHub(t *testing.T) {
	h := startSecureHub(t)
	seedA, seedB := h.addNode("ws-a", "red"), h.addNode("ws-b", "red")
	seedC := h.addNode("ws-c", "blue")
	h.run()
	ca := filepath.Join(h.certs, "ca.pem")
	a := newSecureStation(t, h, "ws-a", seedA, ca)
	b := newSecureStation(t, h, "ws-b", seedB, ca)
	c := newSecureStation(t, h, "ws-c", seedC, ca)

	writeSession(t, a, "red1-session", 3)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, _ := a.d.status(t.Context())
		return st.Forwarder != nil && st.Forwarder.Forwarded == 4, fmt.Sprintf("ws-a: %+v %+v", st.Tailer, st.Forwarder)
	})
	waitFile(t, b, "red1-session", 4)
	writeSession(t, c, "blue-session", 2)
	// ws-c is in another team: its lines reach the hub (its own account)
	// but never ws-a or ws-b, and ws-c never gets red's session.
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, _ := c.d.status(t.Context())
		return st.Forwarder != nil && st.Forwarder.Forwarded == 3, fmt.Sprintf("%+v", st.Forwarder)
	})
	writeSession(t, a, "red2-session", 1)
	waitFile(t, b, "red2-session", 2)
	for _, s := range []*station{a, b} {
		if _, ok := s.sessionFiles()["--sec--/2026-11-30T00-00-00-000Z_blue-session.jsonl"]; ok {
			t.Errorf("%s received another team's session", s.name)
		}
	}
	if files := c.sessionFiles(); len(files) != 1 {
		t.Errorf("ws-c sees other teams' sessions: %v", files)
	}

	tlsOpt := nats.RootCAs(ca)
	url := "tls://localhost:" + strings.Split(h.client, ":")[1]
	// No credentials: refused.
	if nc, err := nats.Connect(url, tlsOpt); err == nil {
		nc.Close()
		t.Fatal("unauthenticated client accepted")
	}
	// ws-a's key may not publish as ws-b, nor outside its subjects.
	kp := seedFileKey(t, seedA)
	errs := make(chan error, 10)
	nc, err := nats.Connect(url, tlsOpt, kp, nats.CustomInboxPrefix(embedded.InboxPrefix("ws-a")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatalf("ws-a's key over TLS: %v", err)
	}
	defer nc.Close()
	js, _ := jetstream.NewWithDomain(nc, "hub")
	if _, err := js.Publish(t.Context(), "pi.up.ws-b.forged", []byte(`{"type":"session","id":"forged"}`)); err == nil {
		t.Fatal("ws-a published on ws-b's subjects")
	}
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("want a permissions violation, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("no permissions violation reported")
	}
	// Subscribing to another node's replies is refused too.
	if _, err := nc.SubscribeSync("_INBOX_ws-b.>"); err == nil {
		nc.Flush()
		select {
		case err := <-errs:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Errorf("want a permissions violation, got %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("subscription to another node's inbox accepted")
		}
	}

	// A hub certificate from another CA fails verification: no replication.
	other := t.TempDir()
	if err := embedded.GenerateDevCerts(other, []string{"localhost"}); err != nil {
		t.Fatal(err)
	}
	seedD := h.addNode("ws-d", "red")
	if err := h.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	d := newSecureStation(t, h, "ws-d", seedD, filepath.Join(other, "ca.pem"))
	writeSession(t, a, "red3-session", 1)
	waitFile(t, b, "red3-session", 2)
	if files := d.sessionFiles(); len(files) != 0 {
		t.Fatalf("a station that trusts another CA replicated: %v", files)
	}
	// The same node with the right CA joins (after the reload above).
	d.stop()
	d.cfg.HubCA = ca
	d.start()
	waitFile(t, d, "red3-session", 2)
}

func seedFileKey(t *testing.T, path string) nats.Option {
	opt, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}
