package projection

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestWriteAfterHoldsViews: while Options.WriteAfter is open the worker
// applies events as they come but writes no view when it catches up (the
// daemon's first read); once it closes, the views are written.
func TestWriteAfterHoldsViews(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	n.stopWorker()
	hold := make(chan struct{})
	n.writeAfter = hold
	n.startWorker()

	sid := "0199aaaa-0000-7000-8000-00000000beef"
	path := filepath.Join(root, "--work--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
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
