package replicate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrashNotThroughALink: a trash folder that is a link out of the
// sessions folder is refused, and the copy stays where it is; the copy
// went through the link, where erase never looked (a probe, 2026-12-06).
func TestTrashNotThroughALink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, TrashDir)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "--p--", "2026-12-06T00-00-00-000Z_s.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &Replicator{opts: Options{Root: root}}
	dst, err := r.moveToTrash(path)
	if err == nil || !strings.Contains(err.Error(), "make it a folder") {
		t.Fatalf("moveToTrash through a link: %q, %v", dst, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the copy moved: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("%d files outside the sessions folder", len(ents))
	}
	// A real folder takes it.
	os.Remove(filepath.Join(root, TrashDir))
	if dst, err := r.moveToTrash(path); err != nil || filepath.Dir(dst) != filepath.Join(root, TrashDir) {
		t.Fatalf("moveToTrash: %q, %v", dst, err)
	}
}
