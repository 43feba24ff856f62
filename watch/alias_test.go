package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHardLinkRemovedIsNoDeletion: a session file with a second name (a
// hard link, which the walk passes over as a second path of a followed
// file) whose first name is removed lives on: no deletion is published
// (before, a tombstone went out, and a restore a walk later: every other
// machine trashed the session, then brought it back), and it is followed
// under the name left.
func TestHardLinkRemovedIsNoDeletion(t *testing.T) {
	root := t.TempDir()
	first := filepath.Join(root, "--a--", "2026-11-29T23-08-16-463Z_hl.jsonl")
	second := filepath.Join(root, "--b--", "copy.jsonl")
	want := []string{header("hl"), entry("e1", "", "one")}
	writeFile(t, first, strings.Join(want, "\n")+"\n")
	if err := os.MkdirAll(filepath.Dir(second), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(first, second); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	n := startNodeWith(t, root, t.TempDir(), Options{RescanInterval: 200 * time.Millisecond, Logger: logs.Logger()}, nil)
	n.waitLines("hl", want)
	waitFor(t, 10*time.Second, func() (bool, string) {
		return n.tailer.Stats().DuplicatePaths == 1, fmt.Sprintf("%d duplicate paths", n.tailer.Stats().DuplicatePaths)
	})
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		got := n.tailer.FilesFor("hl")
		return len(got) == 1 && got[0] == second, fmt.Sprintf("followed as %q", got)
	})
	appendFile(t, second, entry("e2", "e1", "two")+"\n")
	want = append(want, entry("e2", "e1", "two"))
	n.waitLines("hl", want)
	if st := n.tailer.Stats(); st.FilesDeleted != 0 {
		t.Errorf("%d deletions published for a file that lives on under another name:\n%s", st.FilesDeleted, logs.String())
	}
}
