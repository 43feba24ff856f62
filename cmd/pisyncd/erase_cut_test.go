package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
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

	// Cut short after its event was published: the next start drops the
	// record and publishes no second event, which would erase on the other
	// machines what came after the first.
	a.stop()
	d, err = OpenStore(context.Background(), a.cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, err = recordPendingErase(context.Background(), d.log.JetStream(), sid, rel)
	if cerr := d.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	a.start()
	kv, err := a.d.log.JetStream().KeyValue(context.Background(), eventlog.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		_, err := kv.Get(context.Background(), pendingEraseKey(sid))
		return err != nil, "the erase's record is still there"
	})
	erases := 0
	err = eventlog.ReadFiltered(context.Background(), a.d.log.JetStream(), eventlog.LocalStream, eventlog.LocalSubject("ws-a", sid), 0xffffffff, false, func(ev *eventlog.Event) error {
		if ev.Op == eventlog.OpErase {
			erases++
		}
		return nil
	})
	if err != nil || erases != 1 {
		t.Errorf("A's log holds %d erase events of the session (%v), want 1", erases, err)
	}
	for _, s := range []*station{a, b} {
		s.stop()
		if hits := grepTree(s.cfg.StateDir, leaked); len(hits) > 0 {
			t.Errorf("%s: the secret is still in %v", s.name, hits)
		}
	}
}
