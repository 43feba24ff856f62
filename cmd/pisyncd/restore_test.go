package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/replicate"
)

// TestRestoreBringsSessionBack: a session deleted on one machine and
// restored later (from the trash, say) comes back on the others, whichever
// machine restores it, and is continued as before, every line exactly once.
func TestRestoreBringsSessionBack(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")

	sid := "0199eeee-0000-7000-8000-000000000001"
	rel := sessionRel("/work/back", sid)
	aPath, bPath := filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
	mustWriteLines(t, aPath, append([]string{hdrLine(sid, "/work/back")}, chain("a", "", 5, "from A")...))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(b.sessionFiles()[rel])
		return n == 6, fmt.Sprintf("B has %d lines", n)
	})
	appendLine(t, bPath, msgLine("b1", "a00004", "B adds one"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(a.sessionFiles()[rel])
		return n == 7, fmt.Sprintf("A has %d lines", n)
	})
	whole, _ := os.ReadFile(aPath)

	// 1. Deleted on A, B's copy goes to the trash; A restores its file.
	// deleteAndWaitTrash deletes path and returns the copy other moved to
	// its trash for it (a new name: earlier copies stay).
	deleteAndWaitTrash := func(other *station, path string) string {
		t.Helper()
		pattern := filepath.Join(other.cfg.SessionsDir, replicate.TrashDir, "*"+sid+"*")
		before, _ := filepath.Glob(pattern)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		var added string
		waitUntil(t, 30*time.Second, func() (bool, string) {
			now, _ := filepath.Glob(pattern)
			for _, p := range now {
				if !slices.Contains(before, p) {
					added = p
				}
			}
			_, err := os.Stat(filepath.Join(other.cfg.SessionsDir, rel))
			return added != "" && len(now) == len(before)+1 && os.IsNotExist(err), fmt.Sprintf("%s: trash %v (before %v), copy %v", other.name, now, before, err)
		})
		return added
	}
	deleteAndWaitTrash(b, aPath)
	mustWriteLines(t, aPath, splitLines(string(whole)))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		la, lb := lineSet(a.sessionFiles()[rel]), lineSet(b.sessionFiles()[rel])
		return len(lb) == 6 && reflect.DeepEqual(la, lb), fmt.Sprintf("A %d entries, B %d", len(la), len(lb))
	})
	// Continued on both sides after the restore.
	appendLine(t, bPath, msgLine("b2", "b1", "B after the restore"))
	appendLine(t, aPath, msgLine("a9", "b1", "A after the restore"))
	// converged: both files hold the same want distinct entries, and one
	// header each: no line twice.
	converged := func(want int) {
		t.Helper()
		waitUntil(t, 30*time.Second, func() (bool, string) {
			la, lb := lineSet(a.sessionFiles()[rel]), lineSet(b.sessionFiles()[rel])
			return len(la) == want && reflect.DeepEqual(la, lb), fmt.Sprintf("A %d entries, B %d, want %d", len(la), len(lb), want)
		})
		for _, s := range []*station{a, b} {
			if lines := s.sessionFiles()[rel]; len(lines) != want+1 {
				t.Fatalf("%s: %d lines for %d distinct entries and a header: a line is duplicated", s.name, len(lines), want)
			}
		}
	}
	converged(8)

	// 2. Deleted on A again; this time B restores its trashed copy. A,
	// which deleted the session itself, gets it back, its own lines too.
	trashed := deleteAndWaitTrash(b, aPath)
	// As a user would, restore once B has seen its file go (a file moved
	// away and back within the same moment looks untouched to the tailer:
	// same inode, size and mtime).
	waitUntil(t, 10*time.Second, func() (bool, string) {
		files := b.d.tailer.FilesFor(sid)
		return len(files) == 0, fmt.Sprintf("B's tailer still follows %v", files)
	})
	if err := os.Rename(trashed, bPath); err != nil {
		t.Fatal(err)
	}
	converged(8)
	appendLine(t, aPath, msgLine("a10", "a9", "A once more"))
	converged(9)

	for _, s := range []*station{a, b} {
		st, err := s.status()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: tailer %+v, replicator %+v", s.name, st.Tailer, *st.Replicator)
	}
}

// keptCopy sets up what the two tests below start from: A's session
// replicated to B, whose trash folder's name is taken by a file, then
// deleted on A; B has applied the tombstone (a sentinel written after it
// has arrived) and kept its copy. sentinel writes and waits for another.
func keptCopy(t *testing.T) (hub *testHub, a, b *station, sid, bPath string, sentinel func(string)) {
	hub = startTestHub(t)
	a = newStation(t, "ws-a", hub.url(), "")
	b = newStation(t, "ws-b", hub.url(), "")
	if err := os.MkdirAll(b.cfg.SessionsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.cfg.SessionsDir, replicate.TrashDir), []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	sid = "0199eeee-0000-7000-8000-000000000002"
	rel := sessionRel("/work/kept", sid)
	aPath := filepath.Join(a.cfg.SessionsDir, rel)
	mustWriteLines(t, aPath, append([]string{hdrLine(sid, "/work/kept")}, chain("k", "", 3, "kept")...))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(b.sessionFiles()[rel])
		return n == 4, fmt.Sprintf("B has %d lines", n)
	})
	if err := os.Remove(aPath); err != nil {
		t.Fatal(err)
	}
	sentinel = func(sid string) {
		t.Helper()
		rel := writeSentinel(t, a, sid)
		waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[rel]) == 2, "sentinel on B" })
	}
	sentinel("0199eeee-0000-7000-8000-000000000003")
	if n := len(b.sessionFiles()[rel]); n != 4 {
		t.Fatalf("B's copy has %d lines after the failed move, want 4", n)
	}
	return hub, a, b, sid, filepath.Join(b.cfg.SessionsDir, rel), sentinel
}

// TestTrashFailureKeepsCopy: when B cannot move its copy of a session
// deleted on A to the trash, B keeps the session, as with
// PISYNC_DELETE=ignore, and a restart of B does not take the kept file for
// a restored one: the deletion is not undone on A, and B publishes nothing.
func TestTrashFailureKeepsCopy(t *testing.T) {
	hub, a, b, sid, _, sentinel := keptCopy(t)
	b.stop()
	b.start()
	select {
	case <-b.d.tailer.Ready(): // every file present at start read once
	case <-time.After(30 * time.Second):
		t.Fatal("B's tailer never finished its first pass")
	}
	sentinel("0199eeee-0000-7000-8000-000000000004")
	if n, err := hub.count("pi.up.ws-b.>"); err != nil || n != 0 {
		t.Errorf("B published %d messages (%v), want 0: its kept copy was taken for a restore", n, err)
	}
	if files := a.sessionFiles(); len(files[sessionRel("/work/kept", sid)]) != 0 {
		t.Errorf("the session came back on A")
	}
}

// TestKeptCopyDeletedByUser: the kept copy is B's own now; when B's user
// deletes it, B publishes that deletion (the failed move took back its
// "moved by the replicator" mark).
func TestKeptCopyDeletedByUser(t *testing.T) {
	hub, _, _, sid, bPath, _ := keptCopy(t)
	if err := os.Remove(bPath); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n, err := hub.count("pi.up.ws-b." + sid)
		return err == nil && n == 1, fmt.Sprintf("B published %d messages for the session (%v), want its tombstone", n, err)
	})
}
