package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// loggedStation runs a daemon whose log (warnings and up) the test reads.
func loggedStation(t *testing.T, cfg *config.Config) (*station, *testenv.LogBuffer) {
	t.Helper()
	return loggedStationAt(t, cfg, slog.LevelWarn)
}

// loggedStationAt runs a daemon whose log, from level up, the test reads.
func loggedStationAt(t *testing.T, cfg *config.Config, level slog.Level) (*station, *testenv.LogBuffer) {
	t.Helper()
	var log testenv.LogBuffer
	d, err := OpenDaemon(context.Background(), cfg, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	s := &station{t: t, name: cfg.NodeID, cfg: cfg, d: d, cancel: cancel, done: done}
	t.Cleanup(func() {
		if s.cancel != nil { // not stopped by the test (stop, which reports Run's error)
			cancel()
			<-done
			d.Close()
		}
	})
	return s, &log
}

// waitHint waits until the log holds the hint, and then checks it is there
// once however often its warning repeats (at least repeats times).
func waitHint(t *testing.T, log *testenv.LogBuffer, hint, warning string, repeats int) {
	t.Helper()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		s := log.String()
		return strings.Contains(s, hint) && strings.Count(s, warning) >= repeats, s
	})
	if n := strings.Count(log.String(), hint); n != 1 {
		t.Errorf("hint %q logged %d times:\n%s", hint, n, log.String())
	}
}

// TestHintNoHubStream: a hub without PI_HUB (a stock nats-server nobody
// created it on) made the workstation log only "stream not found"; now one
// line says the hub lacks PI_HUB and where the docs say how to create it.
func TestHintNoHubStream(t *testing.T) {
	h := startTestHub(t)
	nc, err := h.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(t.Context(), eventlog.HubStream); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s, log := loggedStation(t, stationConfig(t, "ws-nostream", h.url()))
	writeSession(t, s, "nost-session", 1)
	waitHint(t, log, `msg="hint: the hub has no PI_HUB stream in this node's account.`, "stream not found", 2)
	if !strings.Contains(log.String(), `A stock nats-server as the hub`) {
		t.Errorf("the hint does not point at the docs:\n%s", log.String())
	}
}

// TestHintDuplicateNodeID: two machines with one node id replaced each
// other's leaf connection every second, saying only "Duplicate Remote
// LeafNode Connection"; now one line names the id and the fix.
func TestHintDuplicateNodeID(t *testing.T) {
	h := startTestHub(t)
	_, logA := loggedStation(t, stationConfig(t, "ws-same", h.url()))
	_, logB := loggedStation(t, stationConfig(t, "ws-same", h.url()))
	hint := `msg="hint: another machine joined the hub with this node's id \"ws-same\"`
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return strings.Count(logA.String()+logB.String(), "Duplicate Remote LeafNode Connection") >= 1 &&
			strings.Contains(logA.String()+logB.String(), hint), logA.String() + logB.String()
	})
	for _, log := range []*testenv.LogBuffer{logA, logB} {
		if n := strings.Count(log.String(), hint); n > 1 {
			t.Errorf("hint logged %d times:\n%s", n, log.String())
		}
	}
}

// TestHintNodeIDNotRegistered: a workstation whose PISYNC_NODE_ID is not
// the name its key was registered under got only timeouts and "no
// responders"; now, once the hub answers nothing, it names the cause and
// the fix.
func TestHintNodeIDNotRegistered(t *testing.T) {
	h := startSecureHub(t)
	seed := h.addNode("ann", "red")
	h.run()
	cfg := stationConfig(t, "bob", "tls://localhost:"+strings.Split(h.leaf, ":")[1])
	cfg.HubNkey, cfg.HubCA = seed, filepath.Join(h.certs, "ca.pem")
	s, log := loggedStation(t, cfg)
	writeSession(t, s, "bobs-session", 1)
	waitHint(t, log, `msg="hint: the hub accepted this node's key but answers none of its requests`, "paused; retrying", 1)
	if !strings.Contains(log.String(), `this node's id \"bob\"`) {
		t.Errorf("the hint does not name the node id:\n%s", log.String())
	}
}

// TestSeedFileNameIsNoNodeID: a seed file named after another node
// (carol's key kept as carol2.nkey) is no mistake: the key is carol's and
// the node works. The daemon warned at start that PISYNC_NODE_ID should be
// carol2, which would have broken it; now it says nothing, and replicates.
func TestSeedFileNameIsNoNodeID(t *testing.T) {
	h := startSecureHub(t)
	seed, daveSeed := h.addNode("carol", "red"), h.addNode("dave", "red")
	h.run()
	renamed := filepath.Join(t.TempDir(), "carol2.nkey")
	b, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(renamed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := stationConfig(t, "carol", "tls://localhost:"+portOnly(h.leaf))
	cfg.HubNkey, cfg.HubCA = renamed, filepath.Join(h.certs, "ca.pem")
	carol, log := loggedStation(t, cfg)
	if strings.Contains(log.String(), "PISYNC_NODE_ID=carol2") || strings.Contains(log.String(), "carol2.nkey") {
		t.Errorf("false advice at start:\n%s", log.String())
	}
	dave := newSecureStation(t, h, "dave", daveSeed, filepath.Join(h.certs, "ca.pem"))
	writeSession(t, carol, "carol-session", 2)
	waitFile(t, dave, "carol-session", 3)
}

// TestHintFor: the causes are told apart by the warning and by whether the
// node authenticates and its leaf connection is up.
func TestHintFor(t *testing.T) {
	up, down := func() bool { return true }, func() bool { return false }
	for _, c := range []struct {
		msg, err string
		creds    bool
		leaf     func() bool
		want     string
	}{
		{"127.0.0.1:7422 - lid:8 - Leafnode Error 'Duplicate Remote LeafNode Connection'", "", false, up, "duplicate-node-id"},
		{"127.0.0.1:7422 - lid:9 - Leafnode Error 'Authorization Violation'", "", true, down, "hub-refuses-key"},
		{"127.0.0.1:7422 - lid:9 - Leafnode Error 'Authorization Violation'", "", false, down, "hub-wants-key"},
		{"forwarding to the hub paused; retrying", "forwarder: hub stream: nats: API error: code=404 err_code=10059 description=stream not found", false, up, "no-pi-hub"},
		{"copying from the hub paused; retrying", "downloader: hub consumer: replace consumer dl_x: nats: API error: code=404 err_code=10059 description=stream not found", true, up, "no-pi-hub"},
		{"copying from the hub paused; retrying", "downloader: hub consumer: replace consumer dl_x: nats: no responders available for request", true, up, "node-id-not-registered"},
		{"forwarding to the hub paused; retrying", "forwarder: hub stream: context deadline exceeded", true, up, "node-id-not-registered"},
		{"forwarding to the hub paused; retrying", "forwarder: seal: publish key message: key message on PI_KEYS: nats: no response from stream", false, up, "no-pi-keys"},
		{"forwarding to the hub paused; retrying", "forwarder: seal: publish key message: key message on PI_KEYS: context deadline exceeded", true, up, "no-pi-keys"},
		{"forwarding to the hub paused; retrying", "forwarder: erase s1's key messages: key subjects on PI_KEYS: context deadline exceeded", true, up, "no-pi-keys"},
		{"127.0.0.1:7422 - lid:3 - TLS leafnode handshake error: tls: failed to verify certificate: x509: certificate signed by unknown authority", "", true, down, "hub-ca-unset"},
		{"127.0.0.1:7422 - lid:3 - TLS leafnode handshake error: tls: failed to verify certificate: x509: certificate is valid for hub1, not hub.lan", "", true, down, "hub-cert-name"},
		{"127.0.0.1:27422 - lid:5 - TLS leafnode handshake error: tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs", "", true, down, "hub-cert-name"},
		{"hub:7422 - lid:6 - TLS leafnode handshake error: tls: failed to verify certificate: x509: certificate is not valid for any names, but wanted to match hub", "", true, down, "hub-cert-name"},
		{"127.0.0.1:7422 - lid:3 - TLS leafnode handshake error: tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-12-03T19:40:01Z is after 2026-12-01T10:00:00Z", "", true, down, "hub-cert-time"},
		{"127.0.0.1:7422 - lid:3 - TLS leafnode handshake error: tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2025-01-01T00:00:00+01:00 is before 2026-12-01T10:00:00Z", "", false, down, "hub-cert-time"},
		{`Error trying to connect as leafnode to remote server "localhost:24299" (attempt 1): dial tcp 127.0.0.1:24299: connect: connection refused`, "", false, down, "hub-not-listening"},
		{`Error trying to connect as leafnode to remote server "hub.invalid:7422" (attempt 1): dial tcp: lookup hub.invalid: no such host`, "", false, down, "hub-unknown-host"},
		{`Error trying to connect as leafnode to remote server "10.9.9.9:7422" (attempt 40): dial tcp 10.9.9.9:7422: i/o timeout`, "", true, down, "hub-unreachable"},
		{"127.0.0.1:4222 - lid:4 - Leafnode Error 'attempted to connect to wrong port'", "", false, down, "hub-wrong-port"},
		{"127.0.0.1:7422 - lid:7 - Leafnode Error 'maximum account active connections exceeded'", "", true, down, "hub-team-links-full"},
		{"127.0.0.1:40412 - cid:9 - maximum account active connections exceeded", "", false, up, ""}, // a local reader's refusal: no hub in it
		{"projection paused; retrying", "projection: views: nats: API error: code=503 err_code=10023 description=insufficient resources", false, up, "store-at-limit"},
		{"forwarding to the hub paused; retrying", "forwarder: pi.up.bob.s1: nats: API error: code=503 err_code=10023 description=insufficient resources (the team's share)", false, up, ""},
		// Without credentials, or with the hub away, the same errors
		// mean the hub is not there yet: no hint.
		{"copying from the hub paused; retrying", "downloader: hub consumer: nats: no responders available for request", false, up, ""},
		{"copying from the hub paused; retrying", "downloader: hub consumer: nats: no responders available for request", true, down, ""},
		{"projection: stream not found", "", true, up, ""},
	} {
		s := &hintState{nodeID: "bob", creds: c.creds}
		s.leafUp.Store(&c.leaf)
		if key, _ := s.hintFor(c.msg, c.err); key != c.want {
			t.Errorf("%q %q: %q, want %q", c.msg, c.err, key, c.want)
		}
	}
	// What they say: the clock or a renewal for a certificate out of its
	// time; for another CA, that the file is read at start (leafRemote).
	s := &hintState{nodeID: "bob", hubCA: "/etc/ca.pem"}
	if _, text := s.hintFor("TLS leafnode handshake error: x509: certificate has expired or is not yet valid: current time 2026-12-03T19:40:01Z is before 2026-12-04T00:00:00Z", ""); !strings.Contains(text, "check this machine's clock") || !strings.Contains(text, "pisyncd hub certs DIR --renew") {
		t.Errorf("certificate out of its time: %q", text)
	}
	if _, text := s.hintFor("TLS leafnode handshake error: x509: certificate signed by unknown authority", ""); !strings.Contains(text, "reads PISYNC_HUB_CA when it starts: restart it") {
		t.Errorf("another CA: %q", text)
	}
	// A key of another name: both ways out, and that the state dir keeps
	// its id (before, only "set PISYNC_NODE_ID", which the start refuses
	// over a state dir that ran under another id).
	s = &hintState{nodeID: "bob", creds: true}
	up2 := up
	s.leafUp.Store(&up2)
	if _, text := s.hintFor("copying from the hub paused; retrying", "downloader: hub PI_HUB info: context deadline exceeded"); !strings.Contains(text, "`pisyncd hub add-node bob` there") || !strings.Contains(text, "PISYNC_NODE_ID=NAME and a PISYNC_STATE_DIR of its own") {
		t.Errorf("a key of another name: %q", text)
	}
	// The same silence from a hub that answered before is no key of
	// another name: a hub node down, a cluster electing its leaders (the
	// key hint was given when one hub node of three was killed: a
	// cluster probe, 2026-12-07).
	s.worked.Store(&up2)
	for _, err := range []string{"downloader: hub PI_HUB info: context deadline exceeded", "forwarder: hub stream: nats: no responders available for request"} {
		if key, text := s.hintFor("copying from the hub paused; retrying", err); key != "hub-not-answering" || !strings.Contains(text, "NO quorum") || strings.Contains(text, "add-node") {
			t.Errorf("%s, from a hub that answered before: %s %q", err, key, text)
		}
	}
}

// TestHubStartHints: a secured hub with no node registered, or without
// TLS, says so at start, with the fix; a complete one says nothing.
func TestHubStartHints(t *testing.T) {
	secured := &config.Hub{NodesDir: "/var/lib/pisyncd-hub/nodes", TLSCert: "hub.pem", TLSKey: "hub-key.pem"}
	if h := hubStartHints(secured, 2); len(h) != 0 {
		t.Errorf("complete hub: %q", h)
	}
	h := hubStartHints(secured, 0)
	if len(h) != 1 || !strings.Contains(h[0], "no workstation is registered in /var/lib/pisyncd-hub/nodes") || !strings.Contains(h[0], "pisyncd hub add-node NAME") {
		t.Errorf("no nodes: %q", h)
	}
	h = hubStartHints(&config.Hub{NodesDir: "n"}, 1)
	if len(h) != 1 || !strings.Contains(h[0], "without TLS") || !strings.Contains(h[0], "PISYNC_HUB_TLS_CERT") {
		t.Errorf("no TLS: %q", h)
	}
	// An open hub says so; on a leaf listener beyond loopback (the
	// default, 0.0.0.0), that anyone on the network gets in, and how to
	// keep it to this machine.
	if h := hubStartHints(&config.Hub{Open: true, LeafListen: "127.0.0.1:7422"}, 0); len(h) != 1 || strings.Contains(h[0], "not only on this machine") {
		t.Errorf("open hub on loopback: %q", h)
	}
	if h := hubStartHints(&config.Hub{Open: true, LeafListen: "0.0.0.0:7422"}, 0); len(h) != 1 || !strings.Contains(h[0], "PISYNC_HUB_LEAF_LISTEN 0.0.0.0:7422, not only on this machine") || !strings.Contains(h[0], "PISYNC_HUB_LEAF_LISTEN=127.0.0.1:7422") {
		t.Errorf("open hub on every address: %q", h)
	}
}

// TestHubHelpNameDefault: `pisyncd hub help` states the name a hub takes
// when PISYNC_HUB_NAME is unset, and that is the name it takes. (Before,
// the help said "the host name".)
func TestHubHelpNameDefault(t *testing.T) {
	t.Setenv("PISYNC_HUB_NAME", "")
	code, out, _ := mainIn(t, "hub", "help")
	if code != 0 || !strings.Contains(out, "default: pisyncd-hub-<host name up to its first dot>") {
		t.Errorf("hub help: exit %d\n%s", code, out)
	}
	// Its settings are a table in columns, as pisyncd help's (before:
	// tab-separated, unaligned).
	if strings.Contains(out, "\t") || !regexp.MustCompile(`(?m)^PISYNC_HUB_LISTEN +127\.0\.0\.1:4222 +client listener`).MatchString(out) {
		t.Errorf("hub help's settings are not aligned:\n%s", out)
	}
	cfg, err := config.LoadHub()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if want := "pisyncd-hub-" + strings.Split(host, ".")[0]; cfg.Name != want {
		t.Errorf("default name %q, want %q", cfg.Name, want)
	}
}

// TestHintHubWantsKey: a workstation without a key, joining a hub that
// admits registered workstations only, logged only nats-server's
// "Leafnode Error 'Authorization Violation'", every second; now one line
// says the hub wants a key and how to get one.
func TestHintHubWantsKey(t *testing.T) {
	h := startSecureHub(t)
	h.addNode("ws-a", "t1")
	h.run()
	cfg := stationConfig(t, "ws-x", "tls://localhost:"+portOnly(h.leaf))
	cfg.HubCA = filepath.Join(h.certs, "ca.pem")
	s, log := loggedStation(t, cfg)
	waitHint(t, log, "hint: the hub refuses this node: it admits registered workstations only", "Authorization Violation", 1)
	// Status names the cause while the link is down (it said only "down",
	// and the log says the cause once).
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, err := s.status()
		if err != nil {
			return false, err.Error()
		}
		ok := st.HubLinked != nil && !*st.HubLinked && strings.HasPrefix(st.HubLinkCause, "the hub refuses this node: it admits registered workstations only")
		return ok, fmt.Sprintf("linked %v, cause %q", st.HubLinked, st.HubLinkCause)
	})
}

// TestHintHubCA: a workstation that does not trust the hub's CA (no
// PISYNC_HUB_CA, or another CA) logged nats-server's handshake error every
// second and nothing else; now one hint names the setting, and the error
// itself is logged once a minute.
func TestHintHubCA(t *testing.T) {
	h := startSecureHub(t)
	seed := h.addNode("ann", "red")
	h.run()
	other := t.TempDir()
	if err := embedded.GenerateDevCerts(other, []string{"localhost"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ca, hint string }{
		{"", `msg="hint: the hub's certificate is signed by a CA this machine does not trust. Set PISYNC_HUB_CA`},
		{filepath.Join(other, "ca.pem"), `msg="hint: PISYNC_HUB_CA ` + filepath.Join(other, "ca.pem") + ` did not sign the hub's certificate`},
	} {
		cfg := stationConfig(t, "ann", "tls://localhost:"+strings.Split(h.leaf, ":")[1])
		cfg.HubNkey, cfg.HubCA = seed, c.ca
		_, log := loggedStation(t, cfg)
		waitHint(t, log, c.hint, "handshake error", 1)
	}
}

// TestHintHubNotListening: a workstation whose PISYNC_HUB_URLS names a
// port where nothing listens, or the hub's client port, logged nats-server's
// dial error once and then only "no responders" from its retries, and
// status said the link was down without a cause (a newcomer probe on
// 2026-12-07). Now one hint names the cause and the fix, and status shows it.
func TestHintHubNotListening(t *testing.T) {
	client := testenv.FreeAddr(t)
	hub, err := StartHub(context.Background(), &config.Hub{
		Name: "hub-1", StateDir: t.TempDir(), Listen: client, LeafListen: testenv.FreeAddr(t), Replicas: 1, MaxStore: 1 << 30, Open: true,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	for _, c := range []struct {
		name, url, hint string
	}{
		{"closed port", "nats://" + testenv.FreeAddr(t), "nothing listens at the hub's address in PISYNC_HUB_URLS"},
		{"client port", "nats://" + client, "is not for workstations"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, log := loggedStation(t, stationConfig(t, "ws-x", c.url))
			waitUntil(t, 30*time.Second, func() (bool, string) {
				st, err := s.status()
				if err != nil {
					return false, err.Error()
				}
				return st.HubLinked != nil && !*st.HubLinked && strings.Contains(st.HubLinkCause, c.hint),
					fmt.Sprintf("linked %v, cause %q; log:\n%s", st.HubLinked, st.HubLinkCause, log.String())
			})
		})
	}
}
