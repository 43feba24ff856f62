package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
)

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return info.State.Msgs
}

// TestNoCrossTalk: every workstation has streams on the same subjects
// (PI_ALL, the KV buckets). None of one node's writes to them may reach
// another node's copy through the hub: each PI_ALL holds exactly PI_HUB,
// and each state bucket holds only its own node's positions.
func TestNoCrossTalk(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	for i, s := range []*station{a, b} {
		sid := fmt.Sprintf("0199dddd-0000-7000-8000-00000000000%d", i)
		p := filepath.Join(s.cfg.SessionsDir, "--x--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
		os.MkdirAll(filepath.Dir(p), 0o700)
		appendLine(t, p, hdrLine(sid, "/x"))
		for j := 0; j < 30; j++ {
			appendLine(t, p, msgLine(fmt.Sprintf("e%d", j), "", "x"))
		}
	}
	hnc, err := hub.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer hnc.Close()
	hjs, _ := jetstream.New(hnc)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		h := streamMsgs(t, hjs, eventlog.HubStream)
		na, nb := streamMsgs(t, a.d.log.JetStream(), eventlog.AllStream), streamMsgs(t, b.d.log.JetStream(), eventlog.AllStream)
		return h == 62 && na == h && nb == h, fmt.Sprintf("PI_HUB %d, A's PI_ALL %d, B's %d (want 62 each)", h, na, nb)
	})
	// B catches up after a pause: its downloader writes a backlog into its
	// PI_ALL while A's is idle. Those writes must not reach A's PI_ALL.
	b.stop()
	p := filepath.Join(a.cfg.SessionsDir, "--x--", "2026-11-30T00-00-00-000Z_0199dddd-0000-7000-8000-000000000000.jsonl")
	for j := 30; j < 330; j++ {
		appendLine(t, p, msgLine(fmt.Sprintf("e%d", j), "", "x"))
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		h, na := streamMsgs(t, hjs, eventlog.HubStream), streamMsgs(t, a.d.log.JetStream(), eventlog.AllStream)
		return h == 362 && na == 362, fmt.Sprintf("PI_HUB %d, A's PI_ALL %d (want 362)", h, na)
	})
	b.start()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		nb := streamMsgs(t, b.d.log.JetStream(), eventlog.AllStream)
		return nb == 362, fmt.Sprintf("B's PI_ALL %d (want 362)", nb)
	})
	// A few more rounds for anything late to show up.
	r0 := a.d.tailer.Stats().Rescans
	waitUntil(t, 10*time.Second, func() (bool, string) { return a.d.tailer.Stats().Rescans >= r0+3, "rescans" })
	for _, s := range []*station{a, b} {
		if n := streamMsgs(t, s.d.log.JetStream(), eventlog.AllStream); n != 362 {
			t.Errorf("%s: PI_ALL holds %d messages, PI_HUB 362", s.name, n)
		}
		kv, err := s.d.log.JetStream().KeyValue(context.Background(), eventlog.StateBucket)
		if err != nil {
			t.Fatal(err)
		}
		h, err := kv.History(context.Background(), "forwarder.position")
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 1 {
			t.Errorf("%s: forwarder.position has %d revisions kept (history 1); another node wrote into this bucket", s.name, len(h))
		}
		// Its own positions, and the identity of the hub stream each
		// works on and its mark there (eventlog/hubid.go, hubmark.go): no key
		// another node's work makes.
		keys, err := kv.ListKeys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		own := []string{"forwarder.position", "replicator.position", "forwarder.hub", "forwarder.hub.mark", "downloader.hub", "downloader.firstcopy", "downloader.firstcopy.owed"}
		for k := range keys.Keys() {
			if !slices.Contains(own, k) {
				t.Errorf("%s: state bucket holds %q, not one of its own keys %q", s.name, k, own)
			}
		}
	}

	// Directly: what one node publishes on the workstation-local subjects
	// never reaches another node, though a subject that may cross does,
	// along the same connections, in order. The counts above could miss a
	// leak that happens to go unused; this cannot.
	ncA, err := a.d.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer ncA.Close()
	ncB, err := b.d.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer ncB.Close()
	// pi.live.>: what the streams republish for the local listener's
	// readers, in clear, and the readers' read relay.
	local := []string{"pi.all.probe.x", "pi.evt.probe.x", "$KV.pi_state.probe", "$O.probe.x", "pi.live.evt.probe.x", "pi.live.get.PI_LOCAL"}
	// One channel for every subscription: a channel subscription receives
	// in the order the connection reads, so a leak published before the
	// marker arrives before it.
	got := make(chan *nats.Msg, 256)
	for _, subj := range append([]string{"pi.up.ws-b.probe"}, local...) {
		if _, err := ncA.ChanSubscribe(subj, got); err != nil {
			t.Fatal(err)
		}
	}
	ncA.Flush()
	// Interest travels A → hub → B on its own time: the first marker that
	// arrives shows the path is open.
	waitUntil(t, 20*time.Second, func() (bool, string) {
		ncB.Publish("pi.up.ws-b.probe", []byte("open?"))
		ncB.Flush()
		select {
		case <-got:
			return true, ""
		case <-time.After(100 * time.Millisecond):
			return false, "A does not receive B's pi.up.ws-b.probe"
		}
	})
	for _, subj := range local {
		ncB.Publish(subj, []byte("must stay on B"))
	}
	ncB.Publish("pi.up.ws-b.probe", []byte("after"))
	ncB.Flush()
	deadline := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case m := <-got:
			if m.Subject != "pi.up.ws-b.probe" {
				t.Fatalf("B's message on %s reached A", m.Subject)
			}
			done = string(m.Data) == "after"
		case <-deadline:
			t.Fatal("the marker published after the probes never arrived")
		}
	}
}
