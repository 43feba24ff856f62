package replicate

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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
	h := newBusyHarness(t, p, idle, nil)
	s, queue, flush := h.s, h.queue, h.flush
	ahead := h.now.Add(3 * time.Hour)
	if err := os.Chtimes(p, ahead, ahead); err != nil {
		t.Fatal(err)
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
