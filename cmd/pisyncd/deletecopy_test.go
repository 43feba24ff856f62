package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCopyDeletedWhileWrittenElsewhere replays a probe's finding: the
// user deletes A's copy of a session B is writing. Before the tailer's
// walk confirmed the deletion (2 s after the removal), B's next line
// reached A, whose replicator made the file again, holding only the
// header (its other lines were known, so not written again), and the
// lines after waited for good; the deletion was never published, and a
// restart brought the session back whole. Proves that A's copy stays
// deleted, its tombstone goes out, and no line waits.
func TestCopyDeletedWhileWrittenElsewhere(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	sid := "0199eeee-0000-7000-8000-0000000000d1"
	rel := sessionRel("/work/gone", sid)
	aPath, bPath := filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
	mustWriteLines(t, bPath, append([]string{hdrLine(sid, "/work/gone")}, chain("b", "", 5, "from B")...))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(a.sessionFiles()[rel])
		return n == 6, fmt.Sprintf("A has %d lines", n)
	})

	if err := os.Remove(aPath); err != nil {
		t.Fatal(err)
	}
	// B goes on at once: its lines reach A within the 2 s before A's walk
	// confirms the deletion.
	parent := "b00004"
	for i := range 5 {
		id := fmt.Sprintf("b1%04d", i)
		appendLine(t, bPath, msgLine(id, parent, "B goes on"))
		parent = id
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n, err := hub.count("pi.up.ws-a." + sid)
		return err == nil && n == 1, fmt.Sprintf("A published %d messages for the session (%v), want its tombstone", n, err)
	})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		deleted, err := a.d.repl.Deleted(context.Background(), sid)
		return err == nil && deleted, fmt.Sprintf("A's replicator took its own deletion: %v (%v)", deleted, err)
	})
	if _, err := os.Stat(aPath); !os.IsNotExist(err) {
		t.Errorf("A's deleted copy is back: %v, %q", err, a.sessionFiles()[rel])
	}
	if n := a.d.repl.Stats().Waiting; n != 0 {
		t.Errorf("A holds %d lines waiting", n)
	}
}
