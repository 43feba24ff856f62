package replicate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// nopTracker is a tailer that knows no files.
type nopTracker struct{}

func (nopTracker) FilesFor(string) []string               { return nil }
func (nopTracker) Learn(string, [32]byte)                 {}
func (nopTracker) Forget(string) func()                   { return func() {} }
func (nopTracker) Remove(context.Context, []string) error { return nil }

// busyHarness drives one session's flushes against a real file on a clock
// of the test's own: what the replicator's busy check decides, without
// waiting.
type busyHarness struct {
	t   *testing.T
	r   *Replicator
	s   *sess
	now time.Time
}

// newBusyHarness opens the replica at p, session s1, for a replicator of
// node B with the given idle pause.
func newBusyHarness(t *testing.T, p string, idle time.Duration, logger *slog.Logger) *busyHarness {
	h := &busyHarness{t: t, now: time.Now()}
	h.r = New(nil, nil, nopTracker{}, Options{Root: filepath.Dir(p), Node: "B", Idle: idle, Logger: logger})
	h.r.now = func() time.Time { return h.now }
	f, err := openReplica(p, "s1")
	if err != nil {
		t.Fatal(err)
	}
	h.s = h.r.session("s1")
	h.s.checked, h.s.file, h.r.files[p] = true, f, f
	return h
}

// queue puts a line of node A in the session's queue.
func (h *busyHarness) queue(raw string) {
	ev := &eventlog.Event{Node: "A", SID: "s1", Type: "message", Raw: []byte(raw), Sha: sha256.Sum256([]byte(raw))}
	l := session.ParseLine(ev.Raw)
	ev.ID, ev.ParentID = l.ID, l.ParentID
	h.s.queue = append(h.s.queue, ev)
	h.r.waiting.Add(1)
}

// flush moves the clock on by after and flushes the session.
func (h *busyHarness) flush(after time.Duration) {
	h.t.Helper()
	h.now = h.now.Add(after)
	if err := h.r.flushSession(context.Background(), h.s); err != nil {
		h.t.Fatal(err)
	}
}

// TestCrashedWriterFragmentIsEnded: a partial last line that a local pi
// left when it died mid-write holds remote lines back only while it might
// still grow. Once it has stayed unchanged for crashAfter(Idle), it is
// ended with a "\n" as pi ends it when it opens the file, it reads as a
// malformed line (skipped by pi and the tailer), the waiting line follows
// it whole, and one warning names the file. Before, the file counted as
// busy for ever and the line waited silently.
func TestCrashedWriterFragmentIsEnded(t *testing.T) {
	const (
		entC = `{"type":"message","id":"c","parentId":"a","message":{}}`
		frag = `{"type":"message","id":"b","parentId":"a","message":{"content":"cra`
	)
	p := filepath.Join(t.TempDir(), "s1.jsonl")
	writeTestFile(t, p, hdrS1+"\n"+entA+"\n"+frag[:50])
	var logs bytes.Buffer
	idle := time.Second
	h := newBusyHarness(t, p, idle, slog.New(slog.NewTextHandler(&logs, nil)))
	s, queue, flush := h.s, h.queue, h.flush
	unchanged := func(want string) {
		t.Helper()
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Fatalf("file:\n%s\nwant:\n%s", b, want)
		}
		if len(s.queue) != 1 {
			t.Fatalf("%d lines waiting, want 1", len(s.queue))
		}
	}

	queue(entC)
	flush(0)
	unchanged(hdrS1 + "\n" + entA + "\n" + frag[:50])
	// Status says why the line waits, and for which session.
	if !h.r.flush(context.Background()) {
		t.Fatal("flush not durable")
	}
	if st := h.r.Stats(); st.WaitingForPartial != 1 || st.PartialExample != "s1" {
		t.Fatalf("stats while the fragment waits: %d sessions, example %q", st.WaitingForPartial, st.PartialExample)
	}
	flush(crashAfter(idle) - time.Millisecond)
	unchanged(hdrS1 + "\n" + entA + "\n" + frag[:50])
	// The writer goes on: it is at work, and the wait starts again.
	f2, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f2.WriteString(frag[50:])
	f2.Close()
	flush(crashAfter(idle))
	unchanged(hdrS1 + "\n" + entA + "\n" + frag)
	flush(crashAfter(idle) - time.Millisecond)
	unchanged(hdrS1 + "\n" + entA + "\n" + frag)
	if logs.Len() > 0 {
		t.Fatalf("logged while the fragment might still grow: %s", logs.String())
	}

	flush(time.Millisecond)
	want := hdrS1 + "\n" + entA + "\n" + frag + "\n" + entC + "\n"
	if b, _ := os.ReadFile(p); string(b) != want {
		t.Fatalf("after the fragment stayed unchanged for %v:\n%s\nwant:\n%s", crashAfter(idle), b, want)
	}
	if len(s.queue) != 0 {
		t.Fatalf("%d lines still waiting", len(s.queue))
	}
	h.r.flush(context.Background())
	if st := h.r.Stats(); st.WaitingForPartial != 0 {
		t.Fatalf("stats once the fragment is ended: %d sessions wait for it", st.WaitingForPartial)
	}
	if k := session.ParseLine([]byte(frag)).Kind; k != session.Malformed {
		t.Fatalf("the ended fragment reads as %v, want malformed (pi and the tailer skip it)", k)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "file="+p) {
		t.Fatalf("want one warning naming the file, got:\n%s", logs.String())
	}

	// The next line is appended as usual, with no second warning.
	queue(`{"type":"message","id":"d","parentId":"c","message":{}}`)
	flush(idle)
	if b, _ := os.ReadFile(p); !strings.HasSuffix(string(b), `"id":"d","parentId":"c","message":{}}`+"\n") || len(s.queue) != 0 {
		t.Fatalf("the next line was not appended: %q (%d waiting)", b, len(s.queue))
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
	}
}
