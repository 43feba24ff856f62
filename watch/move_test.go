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

// TestFileMovedToANewFolder: a session file moved by hand into a project
// folder made for it just before is the same session, followed under its
// new path: no deletion is published (every other machine would move its
// copy to the trash, then drop the lines that follow), and the lines
// appended after the move are published.
func TestFileMovedToANewFolder(t *testing.T) {
	root := t.TempDir()
	from := filepath.Join(root, "--a--", "2026-11-29T23-08-16-463Z_mv.jsonl")
	want := []string{header("mv"), entry("e1", "", "one")}
	writeFile(t, from, strings.Join(want, "\n")+"\n")
	var logs testenv.LogBuffer
	n := startNodeWith(t, root, t.TempDir(), Options{RescanInterval: 200 * time.Millisecond, Logger: logs.Logger()}, nil)
	n.waitLines("mv", want)
	waitFor(t, 10*time.Second, func() (bool, string) {
		return n.tailer.hasSettled(from), "settled"
	})
	for i := range 3 {
		dir := filepath.Join(root, fmt.Sprintf("--new%d--", i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dir, filepath.Base(from))
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
		from = to
		id := fmt.Sprintf("m%d", i)
		want = append(want, entry(id, "", "after the move"))
		appendFile(t, to, want[len(want)-1]+"\n")
		n.waitLines("mv", want)
		waitFor(t, 10*time.Second, func() (bool, string) {
			got := n.tailer.FilesFor("mv")
			return len(got) == 1 && got[0] == to, fmt.Sprintf("followed as %q", got)
		})
	}
	for _, ev := range n.events("mv") {
		if ev.Op != "" {
			t.Errorf("%s published for a file moved:\n%s", ev.Op, logs.String())
		}
	}
	if st := n.tailer.Stats(); st.FilesDeleted != 0 {
		t.Errorf("%d deletions counted for a file moved", st.FilesDeleted)
	}
}
