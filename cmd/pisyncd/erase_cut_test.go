package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEraseCutShort: an erase cut short after it removed the session's
// file and before it erased the lines and published its event (the daemon
// killed, the erase command interrupted) is carried out again when the
// daemon next starts, before its tailer looks at the files. Before, the
// start took the file gone for a deletion: its tombstone sent the copy on
// every other machine to the trash, secret and all, and the lines stayed.
func TestEraseCutShort(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	sid := "0199ffff-0000-7000-8000-000000000051"
	rel := sessionRel("/work/cut", sid)
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, rel), []string{hdrLine(sid, "/work/cut"), msgLine("e1", "", "key "+leaked)})
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[rel]) == 2, "B's copy" })
	a.stop()

	// Where the erase stood when it was cut short: recorded, the file gone.
	d, err := OpenStore(context.Background(), a.cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, err = recordPendingErase(context.Background(), d.log.JetStream(), sid, rel)
	if cerr := d.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	if err := os.Remove(filepath.Join(a.cfg.SessionsDir, rel)); err != nil {
		t.Fatal(err)
	}

	a.start()
	for _, s := range []*station{a, b} {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			left := leftOf(t, s, sid)
			return left == "", s.name + " keeps " + left
		})
	}
	if st, err := a.status(); err != nil || st.Tailer.FilesDeleted != 0 {
		t.Errorf("A published the file gone as deleted: %+v %v", st.Tailer, err)
	}
	if st, err := b.status(); err != nil || st.Replicator.Trashed != 0 {
		t.Errorf("B moved its copy to the trash: %+v %v", st.Replicator, err)
	}
	for _, s := range []*station{a, b} {
		s.stop()
		if hits := grepTree(s.cfg.StateDir, leaked); len(hits) > 0 {
			t.Errorf("%s: the secret is still in %v", s.name, hits)
		}
	}
}
