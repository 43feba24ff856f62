package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHostileReplicaLink replays attack 6: bob's replica of ann's session
// is replaced by a symbolic link to a file outside the sessions dir (a
// stand-in for ~/.bashrc), then ann appends a line. Proves that the
// replicator never writes through a link: the outside file is unchanged,
// byte for byte, and not even touched.
func TestHostileReplicaLink(t *testing.T) {
	e := startHostile(t, nil)
	sid := "0199d000-0000-7000-8000-000000000003"
	writeSession(t, e.ann, sid, 2) // entries 0199-0, 0199-1
	waitSecFile(t, e.bob, sid, 3, 30*time.Second)
	e.idle(t, sid)

	// Larger than the session file, and old, as a real one would be.
	outside := filepath.Join(t.TempDir(), ".bashrc")
	content := []byte(strings.Repeat("# ~/.bashrc: executed by bash(1) for non-login shells.\nexport PATH=\"$HOME/bin:$PATH\"\n", 50))
	if err := os.WriteFile(outside, content, 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(outside, old, old); err != nil {
		t.Fatal(err)
	}
	st0, _ := os.Stat(outside)

	// Swapped in one rename, so that no moment shows the file missing.
	bPath := secPath(e.bob, sid)
	before, err := os.ReadFile(bPath)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(bPath), ".swap-link")
	if err := os.Symlink(outside, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bPath); err != nil {
		t.Fatal(err)
	}

	appendLine(t, secPath(e.ann, sid), msgLine("0199-2", "0199-1", "ann after the link"))
	e.settle(t, "lnk")

	got, err := os.ReadFile(outside)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("the file outside the sessions dir changed through bob's link (%v): %d bytes, was %d; it ends with %q", err, len(got), len(content), got[max(0, len(got)-200):])
	}
	if st, err := os.Stat(outside); err != nil || !st.ModTime().Equal(st0.ModTime()) || st.Size() != st0.Size() {
		t.Errorf("the file outside the sessions dir was written (%v): size %d → %d, mtime %v → %v", err, st0.Size(), st.Size(), st0.ModTime(), st.ModTime())
	}
	if st, err := e.bob.status(); err != nil || st.Replicator.Quarantined[sid] == "" {
		t.Fatalf("bob's status lists no quarantine of %s (%v): %v", sid, err, st.Replicator.Quarantined)
	}

	// The user mends it: the file itself in the link's place, as it was.
	// After a restart, the line dropped meanwhile is written, with no new
	// line of ann's to bring it (until 2026-12-07 the restart forgot the
	// quarantine, and bob's copy stayed short until ann wrote again).
	e.bob.stop()
	if err := os.Remove(bPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bPath, before, 0o600); err != nil {
		t.Fatal(err)
	}
	e.bob.start()
	waitSecFile(t, e.bob, sid, 4, 30*time.Second)
	if got := readLines(bPath); !strings.Contains(got[3], "ann after the link") {
		t.Errorf("bob's last line: %q", got[3])
	}
	waitUntil(t, 10*time.Second, func() (bool, string) {
		st, err := e.bob.status()
		return err == nil && len(st.Replicator.Quarantined) == 0, fmt.Sprintf("quarantined %v (%v)", st.Replicator.Quarantined, err)
	})
	if got, err := os.ReadFile(outside); err != nil || !bytes.Equal(got, content) {
		t.Errorf("the file outside changed after the mend (%v)", err)
	}
}

// TestQuarantineGoesWithAnErase: a session quarantined here (a link in its
// file's place) and then erased by its origin is no longer listed as
// quarantined, nor tried again at the next start (status named the erased
// session's cause until a restart: a verifying probe, 2026-12-07).
func TestQuarantineGoesWithAnErase(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	sid := "0199ffff-0000-7000-8000-0000000000q1"
	rel := sessionRel("/work/q", sid)
	aPath, bPath := filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
	mustWriteLines(t, aPath, []string{hdrLine(sid, "/work/q"), msgLine("e1", "", "one")})
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[rel]) == 2, "B's copy" })
	outside := filepath.Join(t.TempDir(), "elsewhere.jsonl")
	if err := os.WriteFile(outside, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(bPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, bPath); err != nil {
		t.Fatal(err)
	}
	appendLine(t, aPath, msgLine("e2", "e1", "two"))
	quarantined := func() (map[string]string, error) {
		st, err := b.status()
		return st.Replicator.Quarantined, err
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		q, err := quarantined()
		return err == nil && q[sid] != "", fmt.Sprintf("quarantined %v (%v)", q, err)
	})
	if _, err := eraseViaDaemon(context.Background(), a.cfg, sid); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		q, err := quarantined()
		return err == nil && len(q) == 0, fmt.Sprintf("quarantined %v (%v)", q, err)
	})
	b.stop()
	b.start()
	// A new line of another session, written after the restart's first
	// flush: by then a record left behind would have been tried again.
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, sessionRel("/work/q", "0199ffff-0000-7000-8000-0000000000q2")),
		[]string{hdrLine("0199ffff-0000-7000-8000-0000000000q2", "/work/q"), msgLine("f1", "", "after")})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return len(b.sessionFiles()[sessionRel("/work/q", "0199ffff-0000-7000-8000-0000000000q2")]) == 2, "B's copy of another session"
	})
	if q, err := quarantined(); err != nil || len(q) != 0 {
		t.Errorf("after a restart: quarantined %v (%v)", q, err)
	}
	if got, _ := os.ReadFile(outside); len(got) != 0 {
		t.Errorf("the file outside was written: %q", got)
	}
}

// TestOwnSessionThroughALinkStopsNothing: a session file of ann's own is a
// link to a file outside the sessions dir (which the tailer follows and
// publishes). Its header comes back to ann from the hub, and her
// replicator cannot open the file to read its version; bob's sessions,
// new and continued, before and after a restart of ann's, are written on
// ann all the same. (Before, the header's error stopped ann's replicator
// at every attempt and every start, and no line of bob's was written on
// ann again, while status and /healthz said nothing: a probe, 2026-12-07.)
func TestOwnSessionThroughALinkStopsNothing(t *testing.T) {
	e := startHostile(t, nil)
	before := "0199d000-0000-7000-8000-0000000000b1"
	writeSession(t, e.bob, before, 1)
	waitSecFile(t, e.ann, before, 2, 30*time.Second)

	linked := "0199d000-0000-7000-8000-0000000000a1"
	outside := filepath.Join(t.TempDir(), "kept-elsewhere.jsonl")
	if err := writeLines(outside, []string{hdrLine(linked, "/sec"), msgLine("a1-0", "", "ann's linked session")}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, secPath(e.ann, linked)); err != nil {
		t.Fatal(err)
	}
	waitSecFile(t, e.bob, linked, 2, 30*time.Second) // its header is on the hub, and back on ann

	appendLine(t, secPath(e.bob, before), msgLine("0199-1", "0199-0", "bob goes on"))
	after := "0199d000-0000-7000-8000-0000000000b2"
	writeSession(t, e.bob, after, 2)
	waitSecFile(t, e.ann, after, 3, 30*time.Second)
	waitSecFile(t, e.ann, before, 3, 30*time.Second)

	e.ann.stop()
	e.ann.start()
	again := "0199d000-0000-7000-8000-0000000000b3"
	writeSession(t, e.bob, again, 2)
	waitSecFile(t, e.ann, again, 3, 30*time.Second)
	if got, err := os.ReadFile(outside); err != nil || len(splitLines(string(got))) != 2 {
		t.Errorf("the linked file outside the sessions dir changed (%v): %q", err, got)
	}
}

// TestSessionFileNameNotUTF8: a session whose file name is not UTF-8
// (pi writes whatever the file system takes) reaches the other machine,
// its copy named after the session, and ann's restart publishes none of
// its lines again. (Before, its lines were refused on every machine, ann's
// own included, as "bad-file-name": a probe, 2026-12-07.)
func TestSessionFileNameNotUTF8(t *testing.T) {
	e := startHostile(t, nil)
	sid := "0199d000-0000-7000-8000-0000000000c1"
	odd := filepath.Join(e.ann.cfg.SessionsDir, "--sec--", "bad\xffname.jsonl")
	if err := writeLines(odd, []string{hdrLine(sid, "/sec"), msgLine("c1-0", "", "an odd name")}); err != nil {
		t.Fatal(err)
	}
	waitSecFile(t, e.bob, sid, 2, 30*time.Second)
	appendLine(t, odd, msgLine("c1-1", "c1-0", "and on"))
	waitSecFile(t, e.bob, sid, 3, 30*time.Second)
	st, err := e.ann.status()
	if err != nil {
		t.Fatal(err)
	}
	held := st.Stream.Messages

	e.ann.stop()
	e.ann.start()
	e.settle(t, "odd")
	for _, s := range []*station{e.ann, e.bob} {
		st, err := s.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Admission != nil && st.Admission.Rejected != 0 {
			t.Errorf("%s rejected %d event(s): %+v", s.name, st.Admission.Rejected, st.Admission)
		}
	}
	if st, err := e.ann.status(); err != nil || st.Stream.Messages != held+2 { // and ann's sentinel
		t.Errorf("ann's PI_LOCAL holds %d messages after her restart, want %d (%v)", st.Stream.Messages, held+2, err)
	}
}
