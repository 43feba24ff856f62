package projection

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// nodeWithOneLine runs a node over a session of one line, sid's, and
// returns it once the projection has applied the line and its header,
// with the session file's path.
func nodeWithOneLine(t *testing.T, sid string) (*node, string) {
	t.Helper()
	root := t.TempDir()
	path := filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
	writeFile(t, path, []byte(header(sid)+"\n"+entry("a1", "", "one")+"\n"))
	n := startNode(t, root, t.TempDir())
	waitFor(t, 30*time.Second, func() (bool, string) {
		st := n.worker.Stats()
		return st.Applied == 2, fmt.Sprintf("applied %d", st.Applied)
	})
	return n, path
}

// TestTailFromNowSkipsWhatTheStoreHeld: a tail from now has only entries
// the store did not hold when it began, though the projection applies
// older ones after it (catching up after a restart): it printed a kill -9's
// whole backlog of old entries, then was dropped as too slow (a probe,
// 2026-12-07). The old ones are not even queued.
func TestTailFromNowSkipsWhatTheStoreHeld(t *testing.T) {
	sid := "0199eeee-0000-7000-8000-000000000003"
	n, path := nodeWithOneLine(t, sid)
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

// TestTailReplaysBounded: at most tailReplays tails replay the streams at
// once; another waits until one of them has replayed, then replays all.
// Each replay reads through a buffer of up to 8 MiB, and 150 tails from the
// start whose readers did not read on held the daemon at 965 MB (a probe,
// 2026-12-07).
func TestTailReplaysBounded(t *testing.T) {
	n, _ := nodeWithOneLine(t, "0199eeee-0000-7000-8000-000000000004")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	hold := make(chan struct{})
	replaying := make(chan int, tailReplays+1)
	tail := func(i int) {
		first := true
		n.worker.Tail(ctx, TailOptions{FromStart: true}, func(TailEntry) error {
			if first {
				first = false
				replaying <- i
				<-hold // a reader that does not read on
			}
			return nil
		})
	}
	for i := range tailReplays {
		go tail(i)
	}
	for range tailReplays {
		select {
		case <-replaying:
		case <-time.After(30 * time.Second):
			t.Fatal("the first tails did not replay")
		}
	}
	go tail(tailReplays)
	// The last one waits: were it replaying, it would say so before the
	// deadline; a slot freed lets it through.
	select {
	case i := <-replaying:
		t.Fatalf("tail %d replays beside %d others", i, tailReplays)
	case <-time.After(500 * time.Millisecond):
	}
	close(hold)
	select {
	case <-replaying:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting tail did not replay once the others had")
	}
}
