package projection

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestTailFromNowSkipsWhatTheStoreHeld: a tail from now has only entries
// the store did not hold when it began, though the projection applies
// older ones after it (catching up after a restart): it printed a kill -9's
// whole backlog of old entries, then was dropped as too slow (a probe,
// 2026-12-07). The old ones are not even queued.
func TestTailFromNowSkipsWhatTheStoreHeld(t *testing.T) {
	root := t.TempDir()
	sid := "0199eeee-0000-7000-8000-000000000003"
	path := filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
	writeFile(t, path, []byte(header(sid)+"\n"+entry("a1", "", "one")+"\n"))
	n := startNode(t, root, t.TempDir())
	waitFor(t, 30*time.Second, func() (bool, string) {
		st := n.worker.Stats()
		return st.Applied == 2, fmt.Sprintf("applied %d", st.Applied)
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan TailEntry, tailBuffer+10)
	done := make(chan error, 1)
	go func() {
		done <- n.worker.Tail(ctx, TailOptions{}, func(e TailEntry) error {
			got <- e
			return nil
		})
	}()
	var sub *subscriber
	waitFor(t, 10*time.Second, func() (bool, string) {
		n.worker.subs.mu.Lock()
		defer n.worker.subs.mu.Unlock()
		for s := range n.worker.subs.set {
			sub = s
		}
		return sub != nil && sub.seen != nil, "the tail not subscribed yet"
	})
	// The projection applies the store's old entries again, more of them
	// than a reader's buffer.
	for range tailBuffer + 5 {
		n.worker.subs.publish(&eventlog.Event{Stream: eventlog.LocalStream, Seq: 2, SID: sid, Node: testNode, ID: "a1", Type: "message"})
	}
	appendFile(t, path, entry("a2", "a1", "two")+"\n")
	select {
	case e := <-got:
		if e.ID != "a2" {
			t.Errorf("the tail's first entry is %s (seq %d), want a2, new", e.ID, e.Seq)
		}
	case err := <-done:
		t.Fatalf("the tail ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no entry in 30 s")
	}
}
