package projection

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSnapshotKeepsTheNewestLines: past its bound, a snapshot keeps the
// bytes of the last lines, those nearest the leaf a reader shows first,
// and the tree still holds every entry. (It kept the first ones: a page of
// a session past the web view's 64 MiB opened on 200 entries "not
// loaded".)
func TestSnapshotKeepsTheNewestLines(t *testing.T) {
	root := t.TempDir()
	const sid = "0199dddd-0000-7000-8000-000000000001"
	lines := []string{header(sid)}
	parent := ""
	for i := range 10 {
		id := fmt.Sprintf("u%d", i)
		lines = append(lines, entry(id, parent, fmt.Sprintf("%d %s", i, strings.Repeat("x", 1000))))
		parent = id
	}
	writeFile(t, filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl"), []byte(strings.Join(lines, "\n")+"\n"))
	n := startNode(t, root, t.TempDir())
	waitFor(t, 20*time.Second, func() (bool, string) {
		c, ok := n.catalogEntry(sid)
		return ok && c.Entries == 10, fmt.Sprintf("%+v", c)
	})
	// Room for three of the entries and a bit: the last three are kept.
	max := int64(3*len(lines[10]) + 100)
	snap, err := n.worker.Snapshot(context.Background(), sid, max)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	var held int64
	for i := range snap.Tree.Len() {
		e := snap.Tree.Entry(i)
		if b, ok := snap.Line(e.Ref); ok {
			id, _ := e.ID.String()
			kept, held = append(kept, id), held+int64(len(b))
		}
	}
	if got := strings.Join(kept, " "); got != "u7 u8 u9" || !snap.Truncated || held > max {
		t.Errorf("kept %q (%d bytes of at most %d), truncated %v; want u7 u8 u9, truncated", got, held, max, snap.Truncated)
	}
	if snap.Tree.Len() != 10 {
		t.Errorf("the tree holds %d entries, want 10", snap.Tree.Len())
	}
}
