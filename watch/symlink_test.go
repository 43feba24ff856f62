package watch

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLinkedProjectFolders: pi lists the sessions of symbolic links to
// folders in the sessions dir (spec §1), so the tailer follows them, live:
// the periodic walk is made too rare to help, so only the first walk and
// fsnotify can find what happens.
func TestLinkedProjectFolders(t *testing.T) {
	root, elsewhere := t.TempDir(), t.TempDir()
	linked := filepath.Join(elsewhere, "project-sessions")
	early := filepath.Join(linked, "2026-11-29T23-08-16-463Z_l1.jsonl")
	writeFile(t, early, header("l1")+"\n"+entry("a1", "", "before start")+"\n")
	if err := os.Symlink(linked, filepath.Join(root, "--home-u-linked--")); err != nil {
		t.Fatal(err)
	}
	// A link to a folder inside the root: its files are found under
	// their own names, once.
	inside := filepath.Join(root, "--home-u-real--", "2026-11-29T23-08-16-463Z_l2.jsonl")
	writeFile(t, inside, header("l2")+"\n"+entry("b1", "", "real folder")+"\n")
	if err := os.Symlink(filepath.Dir(inside), filepath.Join(root, "--home-u-alias--")); err != nil {
		t.Fatal(err)
	}

	n := startNodeRescan(t, root, t.TempDir(), time.Hour)
	n.waitLines("l1", []string{header("l1"), entry("a1", "", "before start")})
	n.waitLines("l2", []string{header("l2"), entry("b1", "", "real folder")})

	// An append to a file behind the link, and a new file behind it.
	appendFile(t, filepath.Join(root, "--home-u-linked--", filepath.Base(early)), entry("a2", "a1", "live")+"\n")
	n.waitLines("l1", []string{header("l1"), entry("a1", "", "before start"), entry("a2", "a1", "live")})
	writeFile(t, filepath.Join(linked, "2026-11-29T23-09-00-000Z_l3.jsonl"), header("l3")+"\n")
	n.waitLines("l3", []string{header("l3")})

	// A link made while the daemon runs.
	later := filepath.Join(t.TempDir(), "later")
	writeFile(t, filepath.Join(later, "2026-11-29T23-10-00-000Z_l4.jsonl"), header("l4")+"\n")
	if err := os.Symlink(later, filepath.Join(root, "--home-u-later--")); err != nil {
		t.Fatal(err)
	}
	n.waitLines("l4", []string{header("l4")})
	appendFile(t, filepath.Join(later, "2026-11-29T23-10-00-000Z_l4.jsonl"), entry("c1", "", "through the new link")+"\n")
	n.waitLines("l4", []string{header("l4"), entry("c1", "", "through the new link")})

	// The aliased session was tracked under one path only.
	if got := n.tailer.FilesFor("l2"); len(got) != 1 || got[0] != inside {
		t.Fatalf("session l2 tracked as %q, want only %s", got, inside)
	}
}

// TestLinkedSessionsDir: the sessions dir itself may be a link (to a synced
// or larger disk, say).
func TestLinkedSessionsDir(t *testing.T) {
	real := t.TempDir()
	root := filepath.Join(t.TempDir(), "sessions")
	if err := os.Symlink(real, root); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(real, "--p--", "2026-11-29T23-08-16-463Z_r1.jsonl")
	writeFile(t, path, header("r1")+"\n")
	n := startNodeRescan(t, root, t.TempDir(), time.Hour)
	n.waitLines("r1", []string{header("r1")})
	appendFile(t, path, entry("a1", "", "live")+"\n")
	n.waitLines("r1", []string{header("r1"), entry("a1", "", "live")})
	writeFile(t, filepath.Join(real, "--q--", "2026-11-29T23-09-16-463Z_r2.jsonl"), header("r2")+"\n")
	n.waitLines("r2", []string{header("r2")})
}
