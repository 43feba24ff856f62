package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestRemovedWorkstationUnlinked: `hub remove-node` takes a workstation
// off the hub for good. Workstations connect as leaf nodes, and
// nats-server checks its clients again on a reload but not its leaf
// connections: before the hub closed them itself, bob, removed, stayed
// linked, forwarding and receiving. Now his link goes down and every
// attempt to link again is refused, and ann, whose link the hub closed
// too (it cannot tell which leaf connection is whose), links again and
// goes on. A key replaced (add-node --replace) unlinks the old seed the same way.
func TestRemovedWorkstationUnlinked(t *testing.T) {
	e := startHostileHub(t, nil, nil)
	startHubControl(t, e.hub.testHub)
	t.Setenv("PISYNC_HUB_NODES_DIR", e.hub.nodes)
	var bobLog testenv.LogBuffer
	e.bob.stop()
	e.bob.logs = &bobLog
	e.bob.start()
	waitUntil(t, 30*time.Second, func() (bool, string) { return e.bob.d.srv.HubLinked(), "bob not linked" })

	var out bytes.Buffer
	if err := removeNodeCommand([]string{"bob"}, &out); err != nil {
		t.Fatalf("hub remove-node bob: %v", err)
	}
	t.Logf("hub remove-node bob:\n%s", out.String())
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return !e.bob.d.srv.HubLinked() && strings.Count(bobLog.String(), "Authorization Violation") >= 1,
			fmt.Sprintf("bob, removed: linked %v; his log:\n%s", e.bob.d.srv.HubLinked(), bobLog.String())
	})
	// He is told why, once, and what to do.
	if n := strings.Count(bobLog.String(), "hint: the hub refuses this node's key"); n != 1 {
		t.Errorf("bob's log has the hint %d times:\n%s", n, bobLog.String())
	}

	sid := "0199a000-0006-7000-8000-ann000000000"
	writeSession(t, e.ann, sid, 2)
	js := e.hub.operator(t, "t1")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		var n uint64
		if s, err := js.Stream(t.Context(), eventlog.HubStream); err == nil {
			if info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(eventlog.UpPrefix+".ann."+sid)); err == nil {
				n = info.State.Subjects[eventlog.UpPrefix+".ann."+sid]
			}
		}
		return n == 3 && e.ann.d.srv.HubLinked(), fmt.Sprintf("ann's session on the hub: %d of 3 lines, ann linked %v", n, e.ann.d.srv.HubLinked())
	})
	if e.bob.d.srv.HubLinked() {
		t.Error("bob linked again after his removal")
	}
	if lines := readLines(secPath(e.bob, sid)); lines != nil {
		t.Errorf("ann's session written after bob's removal reached bob: %d lines", len(lines))
	}

	// A key replaced (ann's seed leaked: add-node --replace, then a reload)
	// unlinks whoever holds the old seed: ann, here.
	var annLog testenv.LogBuffer
	e.ann.stop()
	e.ann.logs = &annLog
	e.ann.start()
	waitUntil(t, 30*time.Second, func() (bool, string) { return e.ann.d.srv.HubLinked(), "ann not linked" })
	if _, _, err := embedded.ReplaceNode(e.hub.nodes, "ann", "t1"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := reloadCommand(nil, &out); err != nil {
		t.Fatalf("hub reload: %v", err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return !e.ann.d.srv.HubLinked() && strings.Contains(annLog.String(), "Authorization Violation"),
			fmt.Sprintf("ann, her key replaced: linked %v", e.ann.d.srv.HubLinked())
	})
}
