package watch

import (
	"fmt"
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

// TestLinksThatLoop: links in the sessions dir to its parent and to itself,
// two links to one folder, a hard link and a link to a session file: the
// walk never goes round, and no file is followed under two paths.
func TestLinksThatLoop(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "sessions")
	real := filepath.Join(root, "--home-u-p--", "2026-11-29T23-08-16-463Z_r1.jsonl")
	writeFile(t, real, header("r1")+"\n"+entry("a1", "", "one")+"\n")
	// A session file directly in the parent: pi lists it through the
	// link to the parent (one level), so it is followed, once.
	up := filepath.Join(parent, "2026-11-29T23-09-00-000Z_u1.jsonl")
	writeFile(t, up, header("u1")+"\n")
	elsewhere := filepath.Join(t.TempDir(), "proj")
	other := filepath.Join(elsewhere, "2026-11-29T23-10-00-000Z_o1.jsonl")
	writeFile(t, other, header("o1")+"\n")
	for name, target := range map[string]string{
		"--up--": parent, "--self--": root, "--proj-a--": elsewhere, "--proj-b--": elsewhere,
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(real, filepath.Join(root, "--home-u-p--", "hard.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(root, "--home-u-p--", "soft.jsonl")); err != nil {
		t.Fatal(err)
	}

	n := startNodeRescan(t, root, t.TempDir(), 100*time.Millisecond)
	n.waitLines("r1", []string{header("r1"), entry("a1", "", "one")})
	n.waitLines("u1", []string{header("u1")})
	n.waitLines("o1", []string{header("o1")})
	<-n.tailer.Ready()
	r0 := n.tailer.Stats().Rescans
	waitFor(t, 10*time.Second, func() (bool, string) { return n.tailer.Stats().Rescans >= r0+3, "rescans" })

	check := func(sid string, want string) {
		t.Helper()
		if got := n.tailer.FilesFor(sid); len(got) != 1 || got[0] != want {
			t.Errorf("session %s followed as %q, want only %s", sid, got, want)
		}
	}
	check("r1", real)
	check("u1", filepath.Join(root, "--up--", filepath.Base(up)))
	check("o1", filepath.Join(root, "--proj-a--", filepath.Base(other)))
	st := n.tailer.Stats()
	// hard.jsonl, soft.jsonl and --proj-b--'s o1 are passed over.
	if st.FilesTracked != 3 || st.DuplicatePaths != 3 {
		t.Fatalf("tracked %d files, %d duplicate paths; want 3 and 3 (%+v)", st.FilesTracked, st.DuplicatePaths, st)
	}
	// Appends through any of the names are published once.
	appendFile(t, filepath.Join(root, "--home-u-p--", "hard.jsonl"), entry("a2", "a1", "two")+"\n")
	n.waitLines("r1", []string{header("r1"), entry("a1", "", "one"), entry("a2", "a1", "two")})
	// The counter follows the stored line a moment later; then a few
	// rescans must add nothing.
	waitFor(t, 10*time.Second, func() (bool, string) {
		p := n.tailer.Stats().LinesPublished
		return p == 5, fmt.Sprintf("published %d lines, want 5", p)
	})
	r1 := n.tailer.Stats().Rescans
	waitFor(t, 10*time.Second, func() (bool, string) { return n.tailer.Stats().Rescans >= r1+2, "rescans" })
	if p := n.tailer.Stats().LinesPublished; p != 5 {
		t.Fatalf("published %d lines, want 5", p)
	}
}
