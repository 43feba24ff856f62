package projection

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// holdingNode is a node whose worker runs with an open WriteAfter (hold),
// and the path of session sid's file under its root.
func holdingNode(t *testing.T, sid string) (n *node, path string, hold chan struct{}) {
	root := t.TempDir()
	n = startNode(t, root, t.TempDir())
	n.stopWorker()
	hold = make(chan struct{})
	n.writeAfter = hold
	n.startWorker()
	return n, filepath.Join(root, "--work--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl"), hold
}

// TestWriteAfterHoldsViews: while Options.WriteAfter is open the worker
// applies events as they come but writes no view when it catches up (the
// daemon's first read); once it closes, the views are written.
func TestWriteAfterHoldsViews(t *testing.T) {
	sid := "0199aaaa-0000-7000-8000-00000000beef"
	n, path, hold := holdingNode(t, sid)
	writeFile(t, path, linear(sid, 5, 10))
	applied := func(want int64) {
		waitFor(t, 20*time.Second, func() (bool, string) {
			st := n.worker.Stats()
			return st.Applied == want, fmt.Sprintf("%d of %d events applied", st.Applied, want)
		})
	}
	applied(6)
	// The first round was applied in full before this line was written:
	// a worker that writes on catching up has written its views by the
	// time it applies the line.
	appendFile(t, path, entry("e0000005", "e0000004", "one more")+"\n")
	applied(7)
	if st := n.worker.Stats(); st.Writes != 0 || st.Flushes != 0 {
		t.Fatalf("views written while WriteAfter is open: %+v", st)
	}
	// Listed only once its entry is filled from the tree: not half.
	if c, ok := n.catalogEntry(sid); ok {
		t.Fatalf("catalog lists the session before its views are built: %+v", c)
	}
	var cat CatalogEntry
	if n.kvGet(sessionKey(sid, "cat"), &cat) {
		t.Fatalf("catalog value in the bucket before WriteAfter closed: %+v", cat)
	}

	close(hold)
	waitFor(t, 20*time.Second, func() (bool, string) {
		ok := n.kvGet(sessionKey(sid, "cat"), &cat)
		return ok && cat.Entries == 6, fmt.Sprintf("catalog value %+v (%v)", cat, ok)
	})
	if c, ok := n.catalogEntry(sid); !ok || c.Entries != 6 {
		t.Fatalf("catalog after WriteAfter closed: %+v, %v", c, ok)
	}
	var cv ContextView
	if !n.kvGet(sessionKey(sid, "ctx"), &cv) || cv.Entries != 6 || string(cv.LeafID) != `"e0000005"` {
		t.Fatalf("context index after WriteAfter closed: %+v", cv)
	}
}

// TestWriteAfterStopsAtLargeSession: while WriteAfter is open, the
// follower applies a session only while it is small; at a line longer than
// overlapLine it stops its consumer and waits, and once WriteAfter closes
// a new consumer delivers that line and the rest, each applied once.
func TestWriteAfterStopsAtLargeSession(t *testing.T) {
	sid := "0199aaaa-0000-7000-8000-00000000cafe"
	n, path, hold := holdingNode(t, sid)
	writeFile(t, path, linear(sid, 2, 10)) // the header and two entries
	waitFor(t, 20*time.Second, func() (bool, string) {
		st := n.worker.Stats()
		return st.Applied == 3, fmt.Sprintf("%d of 3 events applied", st.Applied)
	})
	// A line over overlapLine (split into chunks), then a small one.
	appendFile(t, path, entry("e0000002", "e0000001", strings.Repeat("x", 3*overlapLine))+"\n")
	appendFile(t, path, entry("e0000003", "e0000002", "after")+"\n")
	// Both are in the stream: the tailer published them.
	waitFor(t, 20*time.Second, func() (bool, string) {
		_, ev, err := n.log.Last(context.Background(), sid)
		return err == nil && ev != nil && ev.ID == "e0000003", fmt.Sprintf("last line published: %v, %v", ev, err)
	})
	close(hold)
	var cv ContextView
	waitFor(t, 20*time.Second, func() (bool, string) {
		ok := n.kvGet(sessionKey(sid, "ctx"), &cv)
		return ok && cv.Entries == 4, fmt.Sprintf("context index %+v (%v)", cv, ok)
	})
	if st := n.worker.Stats(); st.Applied != 5 || st.Skipped != 0 {
		t.Fatalf("each event applied once: %+v", st)
	}
	if string(cv.LeafID) != `"e0000003"` {
		t.Fatalf("leaf %s, want e0000003", cv.LeafID)
	}
}

func TestOverlapEnds(t *testing.T) {
	w := &Worker{opts: Options{WriteAfterBytes: 100 << 20}}
	for _, c := range []struct {
		held, session int64
		size          int
		want          bool
	}{
		{300, 300, 300, false},
		{1 << 20, 1 << 20, overlapLine, false},
		{1 << 20, 1 << 20, overlapLine + 1, true}, // a long line
		{2 << 20, 1<<20 + 1, 300, true},           // a large session
		{100<<20 + 1, 300, 300, true},             // the bound on the whole
	} {
		if got := w.overlapEnds(c.held, c.session, c.size); got != c.want {
			t.Errorf("overlapEnds(%d, %d, %d) = %v, want %v", c.held, c.session, c.size, got, c.want)
		}
	}
}
