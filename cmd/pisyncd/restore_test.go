package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
	deleteAndWaitTrash := func(from, other *station, path string) string {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		var trashed []string
		waitUntil(t, 30*time.Second, func() (bool, string) {
			trashed, _ = filepath.Glob(filepath.Join(other.cfg.SessionsDir, replicate.TrashDir, "*"+sid+"*"))
			_, err := os.Stat(filepath.Join(other.cfg.SessionsDir, rel))
			return len(trashed) > 0 && os.IsNotExist(err), fmt.Sprintf("%s: trash %v, copy %v", other.name, trashed, err)
		})
		return trashed[len(trashed)-1]
	}
	deleteAndWaitTrash(a, b, aPath)
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
	trashed := deleteAndWaitTrash(a, b, aPath)
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
