package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Hints for the mistakes of setting up replication whose own errors name
// neither the cause nor the fix: the retry warnings say only "no
// responders", "context deadline exceeded" or "stream not found", and the
// embedded server repeats "Duplicate Remote LeafNode Connection" or a TLS
// handshake's x509 error every second (logged once a minute: the embedded
// server's logger holds back a message like one it logged within it). The
// first time such a warning is logged, one more line says what is wrong
// and what to do (once per cause, so the log does not grow with the
// retries).

// hintState is shared by every handler derived from one daemon's logger.
type hintState struct {
	nodeID string
	creds  bool   // the node authenticates (an nkey or a .creds file)
	hubCA  string // PISYNC_HUB_CA
	// leafUp reports whether the leaf connection to the hub is up; set
	// once the embedded server runs.
	leafUp atomic.Pointer[func() bool]
	// worked reports whether forwarding or copying worked once since the
	// start; set once they are made.
	worked atomic.Pointer[func() bool]

	mu   sync.Mutex
	said map[string]bool
	// last is the latest hint that applied (said or not): status names it
	// while the link is down, since the log says it once.
	last     string
	lastTime time.Time
}

// causeShown is how long status names a hint's cause after the last
// warning it applied to: the embedded server logs a repeated error once
// a minute.
const causeShown = 150 * time.Second

// recent returns the hint that applied within causeShown of now, or "".
func (s *hintState) recent(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == "" || now.Sub(s.lastTime) > causeShown {
		return ""
	}
	return s.last
}

// hintFor names the cause and fix of a warning, or returns "".
func (s *hintState) hintFor(msg, err string) (key, text string) {
	// A request the hub answered with nothing, or no one.
	unanswered := strings.Contains(err, "no responders") || strings.Contains(err, "deadline exceeded") || strings.Contains(err, "timeout")
	switch {
	case strings.Contains(msg, "Duplicate Remote LeafNode Connection"):
		return "duplicate-node-id", fmt.Sprintf("hint: another machine joined the hub with this node's id %q: the two replace each other's connection every second. Give each machine its own PISYNC_NODE_ID (and, on a secured hub, its own key: pisyncd hub add-node NAME on the hub)", s.nodeID)
	case strings.Contains(msg, "Leafnode Error 'Authorization Violation'") && s.creds:
		return "hub-refuses-key", fmt.Sprintf("hint: the hub refuses this node's key (PISYNC_HUB_NKEY or PISYNC_HUB_CREDS): it is not registered there, or no longer (the hub's operator removed the node, or registered it again with a new key). Nothing is forwarded or received meanwhile, and the link is tried again every second. Ask the hub's operator: `pisyncd hub nodes` lists what the hub admits; `pisyncd hub add-node %s` makes a key (with --replace, a new one for a node registered already). Put its file where PISYNC_HUB_NKEY says and restart pisyncd: the key is read at start", s.nodeID)
	case strings.Contains(msg, "Leafnode Error 'Authorization Violation'"):
		return "hub-wants-key", fmt.Sprintf("hint: the hub refuses this node: it admits registered workstations only, and this one has no key. Get one from the hub's operator (`pisyncd hub add-node %s` on the hub) and set PISYNC_HUB_NKEY to its file", s.nodeID)
	case strings.Contains(msg, "Leafnode Error") && strings.Contains(strings.ToLower(msg), "maximum account active connections exceeded"):
		// A leaf link's refusal: the local listener refuses a reader
		// past its account's bound with the same words.
		return "hub-team-links-full", "hint: the hub refuses this node's link: its team holds as many links as the hub allows (pisyncd hub's PISYNC_HUB_TEAM_MAX_LINKS, 256 by default; a workstation holds one). The hub's log names a node that opens links by the dozen: ask the hub's operator, who removes it (pisyncd hub remove-node NAME) or raises the bound. The link is tried again every second; lines wait meanwhile"
	case strings.Contains(msg, "connect as leafnode") && strings.Contains(msg, "connection refused"):
		return "hub-not-listening", "hint: nothing listens at the hub's address in PISYNC_HUB_URLS: the hub is not running, or that is not the port it takes workstations on (pisyncd hub's PISYNC_HUB_LEAF_LISTEN, 7422 by default; its 4222 is for clients, not workstations). The link is tried again every second; lines wait meanwhile"
	case strings.Contains(msg, "connect as leafnode") && strings.Contains(msg, "no such host"):
		return "hub-unknown-host", "hint: the hub's host name in PISYNC_HUB_URLS is not known here (DNS, /etc/hosts, or a typo). The link is tried again every second; lines wait meanwhile"
	case strings.Contains(msg, "connect as leafnode") && (strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "no route to host") || strings.Contains(msg, "network is unreachable")):
		return "hub-unreachable", "hint: the hub's address in PISYNC_HUB_URLS does not answer from here: this machine is offline, or a firewall drops the port (pisyncd hub's PISYNC_HUB_LEAF_LISTEN, 7422 by default). The link is tried again every second; lines wait meanwhile"
	case strings.Contains(msg, "wrong port"):
		return "hub-wrong-port", "hint: PISYNC_HUB_URLS points at a port of the hub that is not for workstations (its client port, 4222 by default): use the port pisyncd hub's PISYNC_HUB_LEAF_LISTEN names, 7422 by default"
	case strings.Contains(msg, "certificate signed by unknown authority") && s.hubCA == "":
		return "hub-ca-unset", "hint: the hub's certificate is signed by a CA this machine does not trust. Set PISYNC_HUB_CA to the hub's CA certificate (ca.pem, which `pisyncd hub certs` or `hub dev-init` wrote on the hub). Nothing is forwarded or received meanwhile"
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return "hub-ca-other", fmt.Sprintf("hint: PISYNC_HUB_CA %s did not sign the hub's certificate: set it to the CA that did (the hub's ca.pem). The daemon reads PISYNC_HUB_CA when it starts: restart it after replacing the file. Nothing is forwarded or received meanwhile", s.hubCA)
	case strings.Contains(msg, "certificate has expired or is not yet valid"):
		return "hub-cert-time", "hint: the hub's certificate is not valid at this machine's time (the error says both): check this machine's clock first; if it is right, the hub's certificate has expired (a development one is valid a year), and the hub's operator issues a new one from the same CA, `pisyncd hub certs DIR --renew` on the hub, and reloads the hub (`pisyncd hub reload`, or SIGHUP) or restarts it (this machine then needs nothing). Nothing is forwarded or received meanwhile"
	case strings.Contains(msg, "x509: certificate is valid for") || strings.Contains(msg, "x509: certificate is not valid for any names") ||
		strings.Contains(msg, "because it doesn't contain any IP SANs"):
		// Go's x509 words a certificate that names no IP address, when
		// the URL is one, without "valid for".
		return "hub-cert-name", "hint: the hub's certificate does not name the host or address this machine reaches it by (PISYNC_HUB_URLS). Use a name the certificate holds, or have the hub's operator issue one that names it from the same CA (`pisyncd hub certs DIR --renew --hosts NAME,...` on the hub, then `pisyncd hub reload`: the workstations keep trusting the hub). Nothing is forwarded or received meanwhile"
	case strings.Contains(err, "insufficient resources") && !strings.HasPrefix(err, "forwarder"):
		// This machine's own store (the forwarder's is the hub's: its
		// error names the team's share itself).
		return "store-at-limit", "hint: the event store holds PISYNC_MAX_STORE (pisyncd status shows how much): nothing more is published or copied until it has room, and nothing is lost meanwhile: " + atLimitFix
	case strings.Contains(err, "stream not found") && (strings.HasPrefix(err, "forwarder: hub") || strings.HasPrefix(err, "downloader: hub")):
		return "no-pi-hub", "hint: the hub has no PI_HUB stream in this node's account. pisyncd hub creates it at start; a stock nats-server does not: create it once per team (docs/HUB.md, \"A stock nats-server as the hub\")"
	case (strings.Contains(err, "key message on "+eventlog.KeysStream) || strings.Contains(err, "key subjects on "+eventlog.KeysStream)) && s.leafConnected() && (unanswered || strings.Contains(err, "no response from stream")):
		return "no-pi-keys", "hint: the hub takes none of this node's key messages (end-to-end encryption): its team account has no PI_KEYS stream, or its node permissions predate it (a hub of an earlier version). Upgrade pisyncd hub, which creates PI_KEYS at start; on a stock nats-server create PI_KEYS and regenerate the configuration (docs/HUB.md, \"A stock nats-server as the hub\"). Nothing is forwarded meanwhile"
	case unanswered && s.leafConnected() && s.hubWorked():
		// It answered before: not a key registered under another name
		// (that hint was given when one node of a cluster of three was
		// killed: a cluster probe, 2026-12-07).
		return "hub-not-answering", "hint: the hub answered this node before and answers none of its requests now: a hub node down or restarting (" + clusterSilence + "), or the hub too busy (its log says \"JetStream API queue limit reached\" while another node floods it). Lines wait here, nothing is lost, and the requests are tried again"
	case unanswered && s.creds && s.leafConnected():
		// Not only "set PISYNC_NODE_ID": over this state dir, which keeps
		// the id it first ran under, another id is refused at start.
		return "node-id-not-registered", fmt.Sprintf("hint: the hub accepted this node's key but answers none of its requests. When it never has, the key is most likely registered under another name than this node's id %q: either register this id on the hub (`pisyncd hub add-node %s` there) and set PISYNC_HUB_NKEY to the seed it writes, or run as the key's NAME (`pisyncd hub nodes` on the hub lists them) with PISYNC_NODE_ID=NAME and a PISYNC_STATE_DIR of its own: this state dir keeps the id it first ran under and refuses another (or the hub runs without JetStream domain hub). Or this machine's pisyncd is older than the hub's and asks in a way the hub no longer answers (docs/HUB.md, \"Upgrading\"): upgrade it. When it did before, the hub is too busy to answer: its log then says \"JetStream API queue limit reached\" (another node floods its requests), which passes when the flood stops; this node retries meanwhile", s.nodeID, s.nodeID)
	}
	return "", ""
}

func (s *hintState) hubWorked() bool {
	f := s.worked.Load()
	return f != nil && (*f)()
}

func (s *hintState) leafConnected() bool {
	f := s.leafUp.Load()
	return f != nil && (*f)()
}

// applies records that hint text (of cause key) applies now, for status,
// and reports whether it is the first time for key: the log says it once.
func (s *hintState) applies(key, text string) (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last, s.lastTime = strings.TrimPrefix(text, "hint: "), time.Now()
	if s.said[key] {
		return false
	}
	if s.said == nil {
		s.said = map[string]bool{}
	}
	s.said[key] = true
	return true
}

// hintHandler passes every record on and follows a warning or error of a
// known cause with its hint.
type hintHandler struct {
	slog.Handler
	s *hintState
}

func (h hintHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level < slog.LevelWarn {
		return err
	}
	var errText string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			errText = a.Value.String()
			return false
		}
		return true
	})
	if key, text := h.s.hintFor(r.Message, errText); key != "" && h.s.applies(key, text) {
		hr := slog.NewRecord(r.Time, slog.LevelWarn, text, r.PC)
		hr.AddAttrs(slog.String("cause", key))
		err = errors.Join(err, h.Handler.Handle(ctx, hr))
	}
	return err
}

func (h hintHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return hintHandler{h.Handler.WithAttrs(as), h.s}
}

func (h hintHandler) WithGroup(name string) slog.Handler {
	return hintHandler{h.Handler.WithGroup(name), h.s}
}
