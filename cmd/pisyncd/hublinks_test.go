package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestHubTeamLinksBounded: a node of team red (ws-evil) opens client
// connections and leaf links to the hub with its own key, as many as it
// can. Red's account holds PISYNC_HUB_TEAM_MAX_LINKS of each (4 here) and
// refuses the rest, and team blue's workstations, linked after the
// flood, replicate. (Before, there was no bound: a node of any team could
// take the hub's connections and memory from every team.)
func TestHubTeamLinksBounded(t *testing.T) {
	const links = 4
	h := startSecureHub(t)
	h.cfg.TeamMaxLinks = links
	seedEvil := h.addNode("ws-evil", "red")
	seedB1, seedB2 := h.addNode("ws-b1", "blue"), h.addNode("ws-b2", "blue")
	h.run()
	ca := filepath.Join(h.certs, "ca.pem")

	// Client connections, on the hub's client listener.
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	var refusal error
	for range 3 * links {
		nc, err := nats.Connect("tls://localhost:"+strings.Split(h.client, ":")[1], nats.RootCAs(ca), seedFileKey(t, seedEvil),
			nats.NoReconnect(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			refusal = err
			continue
		}
		conns = append(conns, nc)
	}
	if len(conns) > links || refusal == nil {
		t.Errorf("ws-evil opened %d client connections to red's account (bound %d), last refusal %v", len(conns), links, refusal)
	}
	t.Logf("client connections: %d opened, then %v", len(conns), refusal)

	// Leaf links: servers of the attacker's own, each named apart (the
	// hub closes the older of two links with one name).
	seed, err := os.ReadFile(seedEvil)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hubURL, _ := url.Parse("tls://localhost:" + strings.Split(h.leaf, ":")[1])
	// One at a time: nats-server checks an account's count and then adds
	// the link, so links made at once may pass the bound by as many as
	// are made at once.
	const tries = links + 2
	refused := 0
	redLinks := func() (int, error) {
		lz, err := h.srv.NATS().Leafz(&server.LeafzOptions{Account: "red"})
		if err != nil {
			return 0, err
		}
		return len(lz.Leafs), nil
	}
	for i := range tries {
		before, err := redLinks()
		if err != nil {
			t.Fatal(err)
		}
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("evil-%d", i), DontListen: true, NoSigs: true,
			LeafNode: server.LeafNodeOpts{ReconnectInterval: 100 * time.Millisecond, Remotes: []*server.RemoteLeafOpts{{
				URLs: []*url.URL{hubURL}, Nkey: string(bytes.TrimSpace(seed)),
				TLS: true, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		log := &refusalLog{}
		s.SetLoggerV2(log, false, false, false)
		s.Start()
		t.Cleanup(s.Shutdown)
		waitUntil(t, 30*time.Second, func() (bool, string) {
			n, err := redLinks()
			return err == nil && (n > before || log.refused.Load()), fmt.Sprintf("ws-evil's link %d: red's links on the hub %d (%v), refused %v", i, n, err, log.refused.Load())
		})
		if log.refused.Load() {
			refused++
		}
	}
	linked, err := redLinks()
	if err != nil {
		t.Fatal(err)
	}
	if linked > links || refused == 0 {
		t.Errorf("ws-evil holds %d leaf links to red's account (bound %d), %d refused", linked, links, refused)
	}
	t.Logf("leaf links: %d linked, %d refused", linked, refused)

	// Another team links and replicates.
	b1 := newSecureStation(t, h, "ws-b1", seedB1, ca)
	b2 := newSecureStation(t, h, "ws-b2", seedB2, ca)
	writeSession(t, b1, "blue-after-links", 3)
	waitFile(t, b2, "blue-after-links", 4)
}

// refusalLog is an attacker server's logger: it notes the hub's refusal of
// its leaf link (nats-server's "Maximum Account Connections Exceeded") and
// drops the rest.
type refusalLog struct{ refused atomic.Bool }

func (l *refusalLog) note(format string, v ...any) {
	if strings.Contains(strings.ToLower(fmt.Sprintf(format, v...)), "maximum account") {
		l.refused.Store(true)
	}
}

func (l *refusalLog) Noticef(format string, v ...any) { l.note(format, v...) }
func (l *refusalLog) Warnf(format string, v ...any)   { l.note(format, v...) }
func (l *refusalLog) Fatalf(format string, v ...any)  { l.note(format, v...) }
func (l *refusalLog) Errorf(format string, v ...any)  { l.note(format, v...) }
func (l *refusalLog) Debugf(format string, v ...any)  {}
func (l *refusalLog) Tracef(format string, v ...any)  {}
