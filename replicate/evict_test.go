package replicate

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestSweepLetsGoOfTheIdleSessions: once the sessions know more lines than
// the cap, those left alone for letGoAfter are let go of, the longest alone
// first, down to half the cap, and a session with a line waiting, or a file
// not yet durable, is kept whatever its age (the replicator kept everything
// for the run: a catch-up probe, 2026-12-07). One written to within
// letGoAfter is kept up to twice the cap (TestSweepKeepsTheBusy).
func TestSweepLetsGoOfTheIdleSessions(t *testing.T) {
	dir := t.TempDir()
	r := New(nil, nil, nopTracker{}, Options{Root: dir, Node: "B"})
	r.knownCap = 8
	now := time.Now()
	mk := func(sid string, lines int, age time.Duration) *sess {
		return fileOfLines(r, dir, sid, lines, now.Add(-age))
	}
	mk("oldest", 3, 3*time.Minute)
	mk("older", 3, 2*time.Minute)
	waiting := mk("waiting", 3, 4*time.Minute)
	waiting.queue = []*eventlog.Event{{ID: "x"}}
	dirty := mk("dirty", 3, 5*time.Minute)
	dirty.file.dirty = true
	mk("recent", 3, time.Second)

	r.sweep(now) // 15 lines known, the cap 8: down to 4 at most, the plain ones left alone oldest first
	for sid, want := range map[string]bool{"oldest": false, "older": false, "recent": true, "waiting": true, "dirty": true} {
		_, kept := r.sessions[sid]
		_, file := r.files[filepath.Join(dir, sid+".jsonl")]
		if kept != want || file != want {
			t.Errorf("%s: kept %v, its file %v; want %v", sid, kept, file, want)
		}
	}
	if got := r.Stats().LetGo; got != 2 {
		t.Errorf("let go of %d sessions, want 2", got)
	}
	// Under the cap, nothing more goes (and a second sweep within a
	// second does not count at all).
	r.sweep(now.Add(2 * time.Second))
	if len(r.sessions) != 3 {
		t.Errorf("%d sessions after a sweep under the cap, want 3", len(r.sessions))
	}
}

// TestSweepForgetsTheSmallLeftAlone: under the cap, a session of at most
// smallSession lines left alone for forgetAfter is let go of; a recent
// one, a longer one and one with a line waiting are kept (an idle daemon
// kept every session a day's work touched: a soak probe, 2026-12-07).
func TestSweepForgetsTheSmallLeftAlone(t *testing.T) {
	dir := t.TempDir()
	r := New(nil, nil, nopTracker{}, Options{Root: dir, Node: "B"})
	now := time.Now()
	mk := func(sid string, lines int, age time.Duration) *sess {
		return fileOfLines(r, dir, sid, lines, now.Add(-age))
	}
	mk("small-old", 40, forgetAfter+time.Second)
	mk("small-recent", 40, forgetAfter-time.Second)
	mk("long-old", smallSession+1, time.Hour)
	mk("waiting-old", 40, time.Hour).queue = []*eventlog.Event{{ID: "x"}}
	r.sweep(now)
	for sid, want := range map[string]bool{"small-old": false, "small-recent": true, "long-old": true, "waiting-old": true} {
		if _, kept := r.sessions[sid]; kept != want {
			t.Errorf("%s: kept %v, want %v", sid, kept, want)
		}
	}
	if _, ok := r.letGoOf["small-old"]; !ok || r.Stats().LetGo != 1 {
		t.Errorf("small-old let go of without what tells its file apart (%v), or %d let go of, want 1", ok, r.Stats().LetGo)
	}
}

// TestSweepKeepsTheBusy: sessions written to within letGoAfter stay past
// the cap, up to twice it, and past that the longest alone go first, down
// to twice the cap; a line is counted once, though both the session's
// claims and its file know it. Let go of by age alone, a session of
// 120,000 lines and 200 sessions written at 2,000 lines a second were let
// go of every second and read again at their next line, and new sessions
// waited minutes behind those reads; counted twice, the busy sessions were
// let go of past half the lines the bound was set for (probes, 2026-12-07).
func TestSweepKeepsTheBusy(t *testing.T) {
	dir := t.TempDir()
	r := New(nil, nil, nopTracker{}, Options{Root: dir, Node: "B"})
	r.knownCap = 10
	now := time.Now()
	mk := func(sid string, lines int, age time.Duration) {
		s := r.session(sid)
		s.used = now.Add(-age)
		f := newReplica(filepath.Join(dir, sid+".jsonl"), sid)
		for i := range lines {
			sha := sha256.Sum256(fmt.Appendf(nil, "%s-%d", sid, i))
			f.shas[sha] = struct{}{}
			s.seen[fmt.Sprintf("%s-%d", sid, i)] = claim{sha: sha, node: "A"}
		}
		s.file, r.files[f.path] = f, f
	}
	for i := range 4 {
		mk(fmt.Sprintf("busy%d", i), 4, time.Duration(i)*time.Second)
	}
	r.sweep(now) // 16 lines known, over the cap of 10 and under 20: all written to within letGoAfter
	if len(r.sessions) != 4 || r.Stats().LetGo != 0 {
		t.Fatalf("%d of 4 busy sessions kept, %d let go of", len(r.sessions), r.Stats().LetGo)
	}
	mk("big", 12, -2*time.Second) // written to just now: 28 known, past twice the cap
	r.sweep(now.Add(2 * time.Second))
	// The busy ones left alone longest go, down to 20 at most: busy3 and
	// busy2 (20 left), though each was written to within letGoAfter.
	for sid, want := range map[string]bool{"busy3": false, "busy2": false, "busy1": true, "busy0": true, "big": true} {
		if _, kept := r.sessions[sid]; kept != want {
			t.Errorf("past twice the cap: %s kept %v, want %v", sid, kept, want)
		}
	}
	if got := r.Stats().LetGo; got != 2 {
		t.Errorf("let go of %d sessions, want 2", got)
	}
	if _, ok := r.letGoOf["busy3"]; !ok {
		t.Error("busy3 let go of without being marked to be read again")
	}
}

// TestLetGoReadAgain: a session let go of is read again from its file at
// its next line, and its file is compared with PI_ALL only when it may
// have lost lines meanwhile: another file in its place, a shorter one, or
// one that starts otherwise. Compared every time, 200 sessions written at
// once past twice the cap went from 700 lines a second to 2-9, the
// server scanning PI_ALL's every block for each (probes, 2026-12-07).
func TestLetGoReadAgain(t *testing.T) {
	const sid = "0199bbbb-0000-7000-8000-0000000000e1"
	head := `{"type":"session","version":3,"id":"` + sid + `","cwd":"/p"}` + "\n"
	body := head + `{"type":"message","id":"a1","parentId":null}` + "\n" + `{"type":"message","id":"a2","parentId":"a1"}` + "\n"
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path string)
		want   bool // compared with PI_ALL
	}{
		{"as it was", func(*testing.T, string) {}, false},
		{"pi wrote more", func(t *testing.T, p string) { appendTo(t, p, `{"type":"message","id":"a3","parentId":"a2"}`+"\n") }, false},
		{"cut short", func(t *testing.T, p string) { writeFile(t, p, head) }, true},
		{"another file in its place", func(t *testing.T, p string) {
			writeFile(t, p+".new", body)
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"starts otherwise", func(t *testing.T, p string) {
			writeFile(t, p, strings.Replace(body, `"version":3`, `"version":4`, 1))
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, sid+".jsonl")
			writeFile(t, path, body)
			r := New(nil, nil, oneFile(path), Options{Root: dir, Node: "B"})
			r.knownCap = 1
			r.startPos = 5 // a run that resumed: locate opens a file unchecked
			now := time.Now()
			s := r.session(sid)
			s.used = now.Add(-time.Hour)
			f, err := openReplica(path, sid)
			if err != nil {
				t.Fatal(err)
			}
			s.file, r.files[path] = f, f
			r.sweep(now)
			if _, kept := r.sessions[sid]; kept {
				t.Fatal("not let go of")
			}
			c.change(t, path)
			s = r.session(sid) // a line of it came
			if err := r.locate(s); err != nil || s.file == nil {
				t.Fatalf("located %v: %v", s.file, err)
			}
			if s.refillAll != c.want || s.file.unchecked != c.want || s.letGo != nil {
				t.Errorf("compared with PI_ALL: %v, unchecked %v, want %v", s.refillAll, s.file.unchecked, c.want)
			}
		})
	}
}

// fileOfLines is a session last used at used whose file here holds lines
// lines (their hashes alone: no file is read).
func fileOfLines(r *Replicator, dir, sid string, lines int, used time.Time) *sess {
	s := r.session(sid)
	s.used = used
	f := newReplica(filepath.Join(dir, sid+".jsonl"), sid)
	for i := range lines {
		f.shas[sha256.Sum256(fmt.Appendf(nil, "%s-%d", sid, i))] = struct{}{}
	}
	s.file, r.files[f.path] = f, f
	return s
}

// oneFile is a tracker whose tailer follows one file, of every session.
type oneFile string

func (f oneFile) FilesFor(string) []string { return []string{string(f)} }
func (oneFile) Learn(string, [32]byte)     {}
func (oneFile) Forget(string) func()       { return func() {} }
func (oneFile) Remove(context.Context, []string) error {
	return nil
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
}
