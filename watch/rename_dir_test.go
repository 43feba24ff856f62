package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRenamedFolderStaysWatched: a project folder renamed while the tailer
// runs (pi's cwd renamed, the user tidying up) is still followed live. Its
// inotify watch moves with it, but fsnotify drops a watch whose folder
// moved, by then under the new name the tailer had just asked for: before,
// lines appended after a rename waited for the periodic walk. The walk is
// made too rare to help here, so only fsnotify can find them.
func TestRenamedFolderStaysWatched(t *testing.T) {
	root := t.TempDir()
	n := startNodeRescan(t, root, t.TempDir(), time.Hour)
	want := []string{header("r1")}
	dir := filepath.Join(root, "--home-u-r0--")
	name := "2026-11-29T23-08-16-463Z_r1.jsonl"
	writeFile(t, filepath.Join(dir, name), want[0]+"\n")
	n.waitLines("r1", want)
	for i := 1; i <= 5; i++ {
		next := filepath.Join(root, fmt.Sprintf("--home-u-r%d--", i))
		if err := os.Rename(dir, next); err != nil {
			t.Fatal(err)
		}
		dir = next
		// Two appends: the first may be found by the rename's own events;
		// the second only through a watch of the folder under its new name.
		for j := range 2 {
			id := fmt.Sprintf("e%d-%d", i, j)
			want = append(want, entry(id, "", "after rename"))
			appendFile(t, filepath.Join(dir, name), want[len(want)-1]+"\n")
			n.waitLines("r1", want)
		}
	}
}
