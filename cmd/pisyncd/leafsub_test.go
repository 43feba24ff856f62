package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestLeafSubscriptionSeesNoTeamTraffic: on the leaf port nats-server
// (2.15.3) does not refuse a leaf's wildcard subscription, ">" included
// (it checks only literal subjects), so the hub keeps a teammate's
// subscription to ">". What it delivers through it is checked against the
// node's subscribe permission, its own inbox: a teammate (ws-snoop)
// running a leaf node of its own, subscribed to ">", "pi.>" and ws-a's
// inbox, receives none of ws-a's live lines nor its replies, while the
// team's administration connection on the hub sees the line, and a
// message on ws-snoop's own inbox reaches the same subscription. Another
// team's node receives none either. The team's lines are readable by
// every node of the team anyway, through its own consumer on PI_HUB (by
// design: docs/HUB.md, "What a node may do"; docs/SECURITY.md).
func TestLeafSubscriptionSeesNoTeamTraffic(t *testing.T) {
	h := startSecureHub(t)
	seedA, seedSnoop, seedOther := h.addNode("ws-a", "red"), h.addNode("ws-snoop", "red"), h.addNode("ws-other", "blue")
	h.run()
	ca := filepath.Join(h.certs, "ca.pem")

	watch := func(name, seedFile string) chan *nats.Msg {
		seed, err := os.ReadFile(seedFile)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := embedded.Start(context.Background(), embedded.Config{
			StateDir: t.TempDir(), NodeID: name, HubURLs: []string{"tls://localhost:" + portOnly(h.leaf)},
			HubNkeySeed: bytes.TrimSpace(seed), HubCAFile: ca,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		nc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		ch := make(chan *nats.Msg, 4096)
		for _, subj := range []string{">", "pi.>", "_INBOX_ws-a.>"} {
			if _, err := nc.ChanSubscribe(subj, ch); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, 20*time.Second, func() (bool, string) { return srv.HubLinked(), name + "'s leaf connection" })
		return ch
	}
	snoop, other := watch("ws-snoop", seedSnoop), watch("ws-other", seedOther)
	// The hub holds the subscriptions to ">" (its check of a leaf's
	// subscriptions passes every wildcard).
	waitUntil(t, 10*time.Second, func() (bool, string) {
		lz, err := h.srv.NATS().Leafz(&server.LeafzOptions{Subscriptions: true})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, l := range lz.Leafs {
			if slices.Contains(l.Subs, ">") {
				n++
			}
		}
		return n == 2, "the hub holds the leaf nodes' subscriptions to >"
	})

	admin, err := h.srv.ConnectTeam("red")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adminCh := make(chan *nats.Msg, 1024)
	if _, err := admin.ChanSubscribe("pi.up.>", adminCh); err != nil {
		t.Fatal(err)
	}
	a := newSecureStation(t, h, "ws-a", seedA, ca)
	writeSession(t, a, "live-session", 2)
	seen := func(ch chan *nats.Msg, d time.Duration) string {
		deadline := time.After(d)
		for {
			select {
			case m := <-ch:
				if strings.HasPrefix(m.Subject, "pi.up.ws-a.") || strings.HasPrefix(m.Subject, "_INBOX_ws-a.") {
					return m.Subject
				}
			case <-deadline:
				return ""
			}
		}
	}
	if s := seen(adminCh, 20*time.Second); s == "" {
		t.Fatal("the team's administration connection saw none of ws-a's lines")
	}
	if s := seen(snoop, 5*time.Second); s != "" {
		t.Errorf("a teammate's leaf node subscribed to > received ws-a's %s", s)
	}
	if s := seen(other, time.Second); s != "" {
		t.Errorf("another team's leaf node subscribed to > received ws-a's %s", s)
	}
	// The subscription works: a message on ws-snoop's own inbox, within
	// its subscribe permission, reaches it.
	if err := admin.Publish("_INBOX_ws-snoop.probe", []byte("x")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case m := <-snoop:
			got = m.Subject == "_INBOX_ws-snoop.probe"
		case <-deadline:
			t.Fatal("ws-snoop's subscription to > received nothing, not even on its own subject: the test proves nothing")
		}
	}
}
