package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestHubTeamLinksBounded: a node of team red (ws-evil) opens client
// connections and leaf links to the hub with its own key, as many as it
// can. The hub keeps it to NodeMaxLinks client connections (the link
// guard closes the rest) with room left for pisyncd's own, red's account
// holds PISYNC_HUB_TEAM_MAX_LINKS leaf links (4 here) and refuses the
// rest, and team blue's workstations, linked after the flood, replicate.
// (Before, there was no bound: a node of any team could take the hub's
// connections and memory from every team.)
func TestHubTeamLinksBounded(t *testing.T) {
	const links = 4
	h := startSecureHub(t)
	h.cfg.TeamMaxLinks = links
	seedEvil := h.addNode("ws-evil", "red")
	seedB1, seedB2 := h.addNode("ws-b1", "blue"), h.addNode("ws-b2", "blue")
	h.run()
	ca := filepath.Join(h.certs, "ca.pem")

	// Client connections, on the hub's client listener: the hub keeps
	// ws-evil to NodeMaxLinks of them (the link guard closes the newest),
	// and red's account keeps room for pisyncd's own connection to it.
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	opened := 0
	for range 3 * links {
		nc, err := nats.Connect("tls://localhost:"+strings.Split(h.client, ":")[1], nats.RootCAs(ca), seedFileKey(t, seedEvil),
			nats.NoReconnect(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			continue
		}
		opened++
		conns = append(conns, nc)
	}
	evilKey := nodeKey(t, h, "ws-evil")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n, err := clientsOf(h, "red", evilKey)
		return err == nil && n <= embedded.NodeMaxLinks && h.srv.LinksClosed() > 0,
			fmt.Sprintf("ws-evil holds %d client connections to red's account (%d opened; bound %d), %d closed by the hub (%v)", n, opened, embedded.NodeMaxLinks, h.srv.LinksClosed(), err)
	})
	t.Logf("client connections: %d opened, %d closed by the hub", opened, h.srv.LinksClosed())
	own, err := h.srv.ConnectTeam("red")
	if err != nil {
		t.Fatalf("pisyncd's own connection to red, beside ws-evil's: %v", err)
	}
	own.Close()

	// Leaf links: servers of the attacker's own, each named apart (the
	// hub closes the older of two links with one name).
	seed, pool := seedAndCA(t, seedEvil, ca)
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
		log := &refusalLog{}
		leafServer(t, fmt.Sprintf("evil-%d", i), hubURL, seed, pool, log)
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

// nodeKey is the public key of a node registered on h.
func nodeKey(t *testing.T, h *secureHub, name string) string {
	t.Helper()
	for _, n := range h.srv.Nodes() {
		if n.Name == name {
			return n.Nkey
		}
	}
	t.Fatalf("no node %s on the hub", name)
	return ""
}

// clientsOf counts the client connections to team's account that
// authenticated with key.
func clientsOf(h *secureHub, team, key string) (int, error) {
	cz, err := h.srv.NATS().Connz(&server.ConnzOptions{Account: team, Username: true, Limit: 1 << 20})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cz.Conns {
		if c.AuthorizedUser == key {
			n++
		}
	}
	return n, nil
}

// TestHubNodeLinksBounded: ws-evil, a node of team red, keeps eight leaf
// links of its own making dialling the hub with its key: raw leaf
// connections that authenticate and answer pings (each dialling again as
// soon as its link closes), and nats-server leaf nodes, each named apart.
// Red may hold eight links. The hub closes ws-evil's links past
// NodeMaxLinks as they come and says so with the node's name, and red's
// two workstations, started during the flood, link and replicate;
// pisyncd's own connection to red gets in too. (Before, ws-evil held all
// eight links for as long as it went on, and its teammates could not
// link: a probe, 2026-12-07; and a guard that counted a connection only
// once the server listed it missed the raw links, listed a moment after
// their connect event: the verifying probe.)
func TestHubNodeLinksBounded(t *testing.T) {
	const links = 8
	h := startSecureHub(t)
	h.cfg.TeamMaxLinks = links
	seedEvil := h.addNode("ws-evil", "red")
	seedR1, seedR2 := h.addNode("ws-r1", "red"), h.addNode("ws-r2", "red")
	h.run()
	ca := filepath.Join(h.certs, "ca.pem")
	seed, pool := seedAndCA(t, seedEvil, ca)
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	leafAddr := "localhost:" + strings.Split(h.leaf, ":")[1]
	ctx, cancel := context.WithCancel(context.Background())
	var flooding sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		flooding.Wait()
	})
	for i := range links {
		flooding.Go(func() {
			for ctx.Err() == nil {
				rawLeafLink(ctx, leafAddr, pool, kp, fmt.Sprintf("flood-%d", i))
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
	hubURL, _ := url.Parse("tls://" + leafAddr)
	for i := range links / 2 {
		leafServer(t, fmt.Sprintf("flood-server-%d", i), hubURL, seed, pool, &refusalLog{})
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return h.srv.LinksClosed() > 2*links, fmt.Sprintf("the hub has closed %d of ws-evil's links", h.srv.LinksClosed())
	})

	r1 := newSecureStation(t, h, "ws-r1", seedR1, ca)
	r2 := newSecureStation(t, h, "ws-r2", seedR2, ca)
	writeSession(t, r1, "red-during-the-flood", 3)
	waitFile(t, r2, "red-during-the-flood", 4)
	own, err := h.srv.ConnectTeam("red")
	if err != nil {
		t.Fatalf("pisyncd's own connection to red during the flood: %v", err)
	}
	own.Close()
	if !strings.Contains(h.logs(), "node ws-evil of team red opened more leaf links than a workstation holds") {
		t.Errorf("the hub's log does not name ws-evil:\n%s", h.logs())
	}
	t.Logf("the hub closed %d of ws-evil's links", h.srv.LinksClosed())
}

// rawLeafLink is a leaf link as a program of the attacker's makes it, not
// a nats-server: it authenticates with kp's key, then answers the hub's
// pings until the hub closes the link or ctx ends.
func rawLeafLink(ctx context.Context, addr string, pool *x509.CertPool, kp nkeys.KeyPair, name string) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	var info struct {
		Nonce string `json:"nonce"`
	}
	json.Unmarshal([]byte(strings.TrimPrefix(line, "INFO ")), &info)
	tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err := tc.Handshake(); err != nil {
		return
	}
	pub, _ := kp.PublicKey()
	sig, _ := kp.Sign([]byte(info.Nonce))
	connect, _ := json.Marshal(map[string]any{"nkey": pub, "sig": base64.RawURLEncoding.EncodeToString(sig), "name": name, "tls_required": true, "headers": true, "proto": 1})
	if _, err := fmt.Fprintf(tc, "CONNECT %s\r\nPING\r\n", connect); err != nil {
		return
	}
	tr := bufio.NewReader(tc)
	for {
		l, err := tr.ReadString('\n')
		if err != nil {
			return
		}
		if strings.HasPrefix(l, "PING") {
			fmt.Fprint(tc, "PONG\r\n")
		}
	}
}

// seedAndCA reads a node's seed (trimmed) and the hub's CA as a pool.
func seedAndCA(t *testing.T, seedPath, caPath string) ([]byte, *x509.CertPool) {
	t.Helper()
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return bytes.TrimSpace(seed), pool
}

// leafServer starts a nats-server of the attacker's, named name, that
// links to the hub with seed's key (trying again every 50 ms), logging to
// log; it stops with the test.
func leafServer(t *testing.T, name string, hub *url.URL, seed []byte, pool *x509.CertPool, log *refusalLog) {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		ServerName: name, DontListen: true, NoSigs: true,
		LeafNode: server.LeafNodeOpts{ReconnectInterval: 50 * time.Millisecond, Remotes: []*server.RemoteLeafOpts{{
			URLs: []*url.URL{hub}, Nkey: string(seed),
			TLS: true, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.SetLoggerV2(log, false, false, false)
	s.Start()
	t.Cleanup(s.Shutdown)
}
