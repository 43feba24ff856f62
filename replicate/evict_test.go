package replicate

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestSweepLetsGoOfTheIdleSessions: once the sessions know more lines than
// the cap, those left alone the longest are let go of, down to half the
// cap, and a session with a line waiting, or a file not yet durable, is
// kept whatever its age (the replicator kept everything for the run: a
// catch-up probe, 2026-12-07).
func TestSweepLetsGoOfTheIdleSessions(t *testing.T) {
	dir := t.TempDir()
	r := New(nil, nil, nopTracker{}, Options{Root: dir, Node: "B"})
	r.knownCap = 8
	now := time.Now()
	mk := func(sid string, lines int, age time.Duration) *sess {
		s := r.session(sid)
		s.used = now.Add(-age)
		f := newReplica(filepath.Join(dir, sid+".jsonl"), sid)
		for i := range lines {
			f.shas[sha256.Sum256(fmt.Appendf(nil, "%s-%d", sid, i))] = struct{}{}
		}
		s.file, r.files[f.path] = f, f
		return s
	}
	mk("oldest", 3, 3*time.Minute)
	mk("older", 3, 2*time.Minute)
	waiting := mk("waiting", 3, 4*time.Minute)
	waiting.queue = []*eventlog.Event{{ID: "x"}}
	dirty := mk("dirty", 3, 5*time.Minute)
	dirty.file.dirty = true
	mk("recent", 3, time.Second)

	r.sweep(now) // 15 lines known, the cap 8: down to 4 at most, the plain ones oldest first
	for sid, want := range map[string]bool{"oldest": false, "older": false, "recent": false, "waiting": true, "dirty": true} {
		_, kept := r.sessions[sid]
		_, file := r.files[filepath.Join(dir, sid+".jsonl")]
		if kept != want || file != want {
			t.Errorf("%s: kept %v, its file %v; want %v", sid, kept, file, want)
		}
	}
	if got := r.Stats().LetGo; got != 3 {
		t.Errorf("let go of %d sessions, want 3", got)
	}
	// Under the cap, nothing more goes (and a second sweep within a
	// second does not count at all).
	r.sweep(now.Add(2 * time.Second))
	if len(r.sessions) != 2 {
		t.Errorf("%d sessions after a sweep under the cap, want 2", len(r.sessions))
	}
}
