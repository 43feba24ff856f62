package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSessionsDirRemovedIsNoDeletion: rm -rf of the sessions dir, or of
// every project folder in it, unlinks the files one by one before the
// folders go. Each removal fsnotify reports is no deletion until a walk
// after the removals settle finds the sessions dir still there with
// session files in it: here it finds it gone, or empty, so no session is
// published deleted (every other machine would have trashed its copy).
// Removing one project folder of several still deletes its sessions, and
// only those. (Before, the sessions whose removal fsnotify reported
// before the walk were published deleted.)
func TestSessionsDirRemovedIsNoDeletion(t *testing.T) {
	folders := []string{"--a--", "--b--", "--c--", "--d--"}
	for _, c := range []struct {
		name   string
		remove func(root string) error
		gone   []string // folders whose sessions are deleted
	}{
		{"sessions dir", os.RemoveAll, nil},
		{"every folder", func(root string) error {
			for _, d := range folders {
				if err := os.RemoveAll(filepath.Join(root, d)); err != nil {
					return err
				}
			}
			return nil
		}, nil},
		{"one folder", func(root string) error { return os.RemoveAll(filepath.Join(root, "--b--")) }, []string{"--b--"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "sessions")
			sid := func(d string, i int) string { return fmt.Sprintf("s%s%02d", d[2:3], i) }
			for _, d := range folders {
				for i := range 10 {
					writeFile(t, filepath.Join(root, d, sid(d, i)+".jsonl"), header(sid(d, i))+"\n"+entry("a1", "", "one")+"\n")
				}
			}
			n := startNode(t, root, t.TempDir())
			for _, d := range folders {
				for i := range 10 {
					n.waitLines(sid(d, i), []string{header(sid(d, i)), entry("a1", "", "one")})
				}
			}
			if err := c.remove(root); err != nil {
				t.Fatal(err)
			}
			deleted := func(s string) bool {
				evs := n.events(s)
				return len(evs) > 0 && evs[len(evs)-1].Op == "delete"
			}
			if c.gone == nil {
				waitFor(t, 10*time.Second, func() (bool, string) {
					return n.tailer.Stats().SessionsDirAway, "sessions dir away"
				})
				// Made again, empty (the walks do not count while it is
				// gone): still no session is taken for deleted.
				if err := os.MkdirAll(root, 0o700); err != nil {
					t.Fatal(err)
				}
			} else {
				for _, d := range c.gone {
					for i := range 10 {
						waitFor(t, 10*time.Second, func() (bool, string) { return deleted(sid(d, i)), sid(d, i) + " deleted" })
					}
				}
			}
			// Three walks more: a deletion held for one would be out.
			walks := n.tailer.Stats().Rescans
			waitFor(t, 10*time.Second, func() (bool, string) {
				return n.tailer.Stats().Rescans >= walks+3, "three more walks"
			})
			for _, d := range folders {
				want := false
				for _, g := range c.gone {
					want = want || g == d
				}
				for i := range 10 {
					if got := deleted(sid(d, i)); got != want {
						t.Errorf("%s/%s deleted: %v, want %v", d, sid(d, i), got, want)
					}
				}
			}
			if st, want := n.tailer.Stats(), int64(10*len(c.gone)); st.FilesDeleted != want {
				t.Errorf("filesDeleted %d, want %d", st.FilesDeleted, want)
			}
		})
	}
}

// removedWaiting starts a node with session s1 (one entry) whose removals
// settle after a minute, removes the file once it is published, and
// returns when its deletion waits: long before a walk would confirm it.
func removedWaiting(t *testing.T) (*node, string) {
	t.Helper()
	root := t.TempDir()
	p := filepath.Join(root, "--p--", "s1.jsonl")
	writeFile(t, p, header("s1")+"\n"+entry("a1", "", "one")+"\n")
	n := startNodeWith(t, root, t.TempDir(), Options{RescanInterval: 200 * time.Millisecond}, func(t *Tailer) { t.dels.settle = time.Minute })
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one")})
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		return n.tailer.Stats().DeletionsWaiting == 1, "a deletion waiting"
	})
	return n, p
}

// TestFileBackBeforeDeletionConfirmed: a session file removed and written
// again before a walk confirms its deletion (a restore from a backup, an
// editor's save) publishes neither a deletion nor a restore, only its new
// lines. (Before, a tombstone went out at once, and every other machine
// trashed its copy, then a restore.)
func TestFileBackBeforeDeletionConfirmed(t *testing.T) {
	n, p := removedWaiting(t)
	writeFile(t, p, header("s1")+"\n"+entry("a1", "", "one")+"\n"+entry("a2", "a1", "two")+"\n")
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one"), entry("a2", "a1", "two")})
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.DeletionsWaiting == 0, fmt.Sprintf("deletions waiting %d", st.DeletionsWaiting)
	})
	for _, ev := range n.events("s1") {
		if ev.Op != "" {
			t.Errorf("a %s event for a file back before its deletion was confirmed", ev.Op)
		}
	}
	if st := n.tailer.Stats(); st.FilesDeleted != 0 || st.FilesTracked != 1 {
		t.Errorf("filesDeleted %d, filesTracked %d; want 0, 1", st.FilesDeleted, st.FilesTracked)
	}
}

// TestEraseOfADeletionWaiting: a session whose file was removed, erased
// while its deletion waits for a walk, publishes nothing after the erase:
// Remove returns with no deletion held. (Before the hold was dropped, it
// would have been published on the erased subject, refused, and retried
// for good.)
func TestEraseOfADeletionWaiting(t *testing.T) {
	n, p := removedWaiting(t)
	if err := n.tailer.Remove(t.Context(), []string{p}); err != nil {
		t.Fatal(err)
	}
	if w := n.tailer.Stats().DeletionsWaiting; w != 0 {
		t.Errorf("deletions waiting after the erase's Remove: %d", w)
	}
}

// TestSessionsDirReplacedIsNoDeletion: a sessions dir that is another
// folder now (its link repointed; removed, made again and used by pi)
// holds other sessions; those of the folder before are elsewhere, not
// deleted. Its own sessions are followed. (Before, a repointed link
// published every session of the old folder deleted, and so did the first
// session pi wrote into a sessions dir removed and made again.)
func TestSessionsDirReplacedIsNoDeletion(t *testing.T) {
	for _, c := range []struct {
		name    string
		replace func(t *testing.T, base, root string) string // returns the folder root is now
	}{
		{"link repointed", func(t *testing.T, base, root string) string {
			next := filepath.Join(base, "other")
			if err := os.MkdirAll(next, 0o700); err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(base, "link.tmp")
			if err := os.Symlink(next, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, root); err != nil { // ln -sfn
				t.Fatal(err)
			}
			return next
		}},
		{"removed and made again", func(t *testing.T, base, root string) string {
			real, err := filepath.EvalSymlinks(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(real); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(real, 0o700); err != nil {
				t.Fatal(err)
			}
			return real
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			first := filepath.Join(base, "first")
			root := filepath.Join(base, "sessions")
			for _, s := range []string{"s1", "s2"} {
				writeFile(t, filepath.Join(first, "--p--", s+".jsonl"), header(s)+"\n"+entry("a1", "", "one")+"\n")
			}
			if err := os.Symlink(first, root); err != nil {
				t.Fatal(err)
			}
			n := startNode(t, root, t.TempDir())
			for _, s := range []string{"s1", "s2"} {
				n.waitLines(s, []string{header(s), entry("a1", "", "one")})
			}
			now := c.replace(t, base, root)
			writeFile(t, filepath.Join(now, "--q--", "s3.jsonl"), header("s3")+"\n"+entry("b1", "", "new")+"\n")
			n.waitLines("s3", []string{header("s3"), entry("b1", "", "new")})
			walks := n.tailer.Stats().Rescans
			waitFor(t, 10*time.Second, func() (bool, string) {
				st := n.tailer.Stats()
				return st.Rescans >= walks+3 && st.DeletionsWaiting == 0, fmt.Sprintf("three more walks, no deletion waiting: %+v", st)
			})
			for _, s := range []string{"s1", "s2", "s3"} {
				for _, ev := range n.events(s) {
					if ev.Op != "" {
						t.Errorf("%s: a %s event", s, ev.Op)
					}
				}
			}
			if st := n.tailer.Stats(); st.FilesDeleted != 0 || st.FilesTracked != 1 || st.SessionsDirAway {
				t.Errorf("filesDeleted %d, filesTracked %d, away %v; want 0, 1, false", st.FilesDeleted, st.FilesTracked, st.SessionsDirAway)
			}
		})
	}
}
