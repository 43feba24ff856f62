package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/replicate"
)

// TestTrustedNodes: with PISYNC_TRUSTED_NODES naming only itself, B writes
// A's lines into the session A began, but not A's lines appended to the
// session B began: A cannot steer what B's pi resumes from. The line stays
// in B's event log, and status counts it.
func TestTrustedNodes(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStationWith(t, "ws-b", hub.url(), "", func(c *config.Config) { c.TrustedNodes = []string{"ws-b"} })

	write := func(s *station, sid, cwd string, lines ...string) string {
		p := filepath.Join(s.cfg.SessionsDir, "--"+strings.Trim(strings.ReplaceAll(cwd, "/", "-"), "-")+"--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
		os.MkdirAll(filepath.Dir(p), 0o700)
		for _, l := range lines {
			appendLine(t, p, l)
		}
		return p
	}
	fileLines := func(p string) []string { b, _ := os.ReadFile(p); return splitLines(string(b)) }
	sA, sB := "0199cccc-0000-7000-8000-00000000000a", "0199cccc-0000-7000-8000-00000000000b"
	aOnA := write(a, sA, "/w/a", hdrLine(sA, "/w/a"), msgLine("a1", "", "begun on A"))
	bOnB := write(b, sB, "/w/b", hdrLine(sB, "/w/b"), msgLine("b1", "", "begun on B"))
	aOnB := filepath.Join(b.cfg.SessionsDir, "--w-a--", filepath.Base(aOnA))
	bOnA := filepath.Join(a.cfg.SessionsDir, "--w-b--", filepath.Base(bOnB))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return len(fileLines(aOnB)) == 2 && len(fileLines(bOnA)) == 2, fmt.Sprintf("A's session on B %q, B's on A %q", fileLines(aOnB), fileLines(bOnA))
	})
	// A appends to B's session (untrusted there), then to its own.
	appendLine(t, bOnA, msgLine("a2", "b1", "A steering B's session"))
	appendLine(t, aOnA, msgLine("a3", "a1", "A continuing its own"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := b.status()
		return err == nil && len(fileLines(aOnB)) == 3 && st.Replicator.Untrusted == 1,
			fmt.Sprintf("A's session on B %q, untrusted %v", fileLines(aOnB), st.Replicator)
	})
	if l := fileLines(bOnB); len(l) != 2 {
		t.Fatalf("B's own session got A's line: %q", l)
	}
	// The line is in B's event log all the same.
	n := 0
	if err := b.d.all.ScanSession(t.Context(), sB, false, func(ev *eventlog.Event) error {
		if ev.ID == "a2" {
			n++
		}
		return nil
	}); err != nil || n != 1 {
		t.Fatalf("B's PI_ALL holds a2 %d times: %v", n, err)
	}
}

// TestErasedHereWrittenElsewhere: A erases a session B began, and B, whose
// PISYNC_TRUSTED_NODES leave A out, keeps it and goes on writing it. Its
// later lines are not written on A (the session was erased there) and do
// not wait there for a header that went with the erase. Before, they
// waited for good: status said a session waited for its header, across
// restarts too.
func TestErasedHereWrittenElsewhere(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStationWith(t, "ws-b", hub.url(), "", func(c *config.Config) { c.TrustedNodes = []string{"ws-b"} })
	sid := "0199cccc-0000-7000-8000-0000000000e1"
	rel := sessionRel("/w/kept", sid)
	bPath := filepath.Join(b.cfg.SessionsDir, rel)
	mustWriteLines(t, bPath, []string{hdrLine(sid, "/w/kept"), msgLine("b1", "", "begun on B")})
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(a.sessionFiles()[rel]) == 2, "A's copy" })
	if _, err := eraseViaDaemon(t.Context(), a.cfg, sid); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := b.status()
		return err == nil && st.Admission != nil && st.Admission.ByOrigin["ws-a"].Rejected > 0, fmt.Sprintf("B's admission: %+v %v", st.Admission, err)
	})
	parent := "b1"
	for i := 2; i <= 4; i++ {
		id := fmt.Sprintf("b%d", i)
		appendLine(t, bPath, msgLine(id, parent, "B goes on"))
		parent = id
	}
	quiet := func(s *station, lines int64) {
		t.Helper()
		waitUntil(t, 30*time.Second, func() (bool, string) {
			st, err := s.status()
			if err != nil {
				return false, err.Error()
			}
			r := st.Replicator
			return r.ErasedLines == lines && r.Waiting == 0 && r.WaitingForHeader == 0,
				fmt.Sprintf("%s: lines of the erased session passed over %d (want %d), waiting %d, sessions waiting for a header %d",
					s.name, r.ErasedLines, lines, r.Waiting, r.WaitingForHeader)
		})
		live, copies, err := replicate.SessionFiles(s.cfg.SessionsDir, sid)
		if err != nil || len(live)+len(copies) > 0 {
			t.Fatalf("%s holds files of the erased session: %v %v %v", s.name, live, copies, err)
		}
	}
	quiet(a, 3)
	a.stop()
	a.start()
	appendLine(t, bPath, msgLine("b5", parent, "and on"))
	quiet(a, 1)
	if got := b.sessionFiles()[rel]; len(got) != 6 {
		t.Fatalf("B's file: %q", got)
	}
}
