package replicate

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// TestMtimeAheadOfClockIsNotBusy: a file whose mtime is hours ahead of this
// machine's clock (pi wrote it while the clock was fast, and the clock has
// been set right since) holds remote lines back only for the idle pause,
// timed on our clock, and again whenever it changes. Before, the file counted
// as written "just now" until the clock passed its mtime: the line waited
// for three hours (linesWaiting 2 for good in a run with three daemons).
func TestMtimeAheadOfClockIsNotBusy(t *testing.T) {
	const entB = `{"type":"message","id":"b","parentId":"a","message":{}}`
	p := filepath.Join(t.TempDir(), "s1.jsonl")
	writeTestFile(t, p, hdrS1+"\n"+entA+"\n")
	idle := time.Second
	r := New(nil, nil, nopTracker{}, Options{Root: filepath.Dir(p), Node: "B", Idle: idle})
	now := time.Now()
	r.now = func() time.Time { return now }
	ahead := now.Add(3 * time.Hour)
	if err := os.Chtimes(p, ahead, ahead); err != nil {
		t.Fatal(err)
	}
	f, err := openReplica(p, "s1")
	if err != nil {
		t.Fatal(err)
	}
	s := r.session("s1")
	s.checked, s.file, r.files[p] = true, f, f
	queue := func(raw string) {
		ev := &eventlog.Event{Node: "A", SID: "s1", Type: "message", Raw: []byte(raw), Sha: sha256.Sum256([]byte(raw))}
		l := session.ParseLine(ev.Raw)
		ev.ID, ev.ParentID = l.ID, l.ParentID
		s.queue = append(s.queue, ev)
		r.waiting.Add(1)
	}
	flush := func(after time.Duration) {
		t.Helper()
		now = now.Add(after)
		if err := r.flushSession(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	waiting := func(want int) {
		t.Helper()
		if len(s.queue) != want {
			t.Fatalf("%d lines waiting, want %d", len(s.queue), want)
		}
	}

	queue(entB)
	// Seen for the first time: a writer may be at work.
	flush(0)
	waiting(1)
	flush(idle - time.Millisecond)
	waiting(1)
	// The writer goes on (the clock still fast when it wrote): the wait starts again.
	f2, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f2.WriteString(`{"type":"message","id":"c","parentId":"a","message":{}}` + "\n")
	f2.Close()
	ahead = ahead.Add(time.Second)
	if err := os.Chtimes(p, ahead, ahead); err != nil {
		t.Fatal(err)
	}
	flush(time.Millisecond)
	waiting(1)
	flush(idle - time.Millisecond)
	waiting(1)
	// Still for the idle pause on our clock: the line goes in.
	flush(time.Millisecond)
	waiting(0)
	if b, _ := os.ReadFile(p); string(b) != hdrS1+"\n"+entA+"\n"+`{"type":"message","id":"c","parentId":"a","message":{}}`+"\n"+entB+"\n" {
		t.Fatalf("file:\n%s", b)
	}
}
