package projection

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestDropSmallTrees: an idle daemon lets go of the trees of small
// sessions and keeps those of long ones; a session whose tree went has it
// rebuilt at its next line, and its views stay exact.
func TestDropSmallTrees(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	small, long := "0199bbbb-0000-7000-8000-0000000000a1", "0199bbbb-0000-7000-8000-0000000000a2"
	paths := map[string]string{
		small: filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+small+".jsonl"),
		long:  filepath.Join(root, "--p--", "2026-11-29T23-08-17-463Z_"+long+".jsonl"),
	}
	writeFile(t, paths[small], linear(small, smallTree-1, 10)) // the header and smallTree-1 entries
	writeFile(t, paths[long], linear(long, smallTree+10, 10))
	n := startNode(t, root, state)
	contexts := func() {
		t.Helper()
		for sid, p := range paths {
			n.waitFileContext(sid, p)
		}
	}
	contexts()
	before := n.worker.Stats()
	if before.Trees != 2 {
		t.Fatalf("after the first read: %+v, want both trees loaded", before)
	}
	if got := n.worker.DropSmallTrees(); got != 1 {
		t.Fatalf("DropSmallTrees dropped %d trees, want the small session's alone", got)
	}
	if st := n.worker.Stats(); st.Trees != 1 {
		t.Fatalf("after the drop: %+v, want the long session's tree kept", st)
	}
	if got := n.worker.DropSmallTrees(); got != 0 {
		t.Fatalf("a second DropSmallTrees dropped %d trees", got)
	}

	appendFile(t, paths[small], entry("n1", fmt.Sprintf("e%07d", smallTree-2), "after the drop")+"\n")
	contexts()
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.worker.Stats()
		return st.Trees == 2 && st.Rebuilds == before.Rebuilds+1, fmt.Sprintf("%+v", st)
	})
}
