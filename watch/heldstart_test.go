package watch

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/pisyncd/pisyncd/eventlog"
)

// countingLog is the real event log, counting the reads of a session's
// last message; afterHeld, when set, runs once Held has answered (as
// another writer would between the tailer's start and its first publish).
type countingLog struct {
	Log
	lasts     atomic.Int64
	afterHeld func(Log)
}

func (c *countingLog) Last(ctx context.Context, sid string) (uint64, *eventlog.Event, error) {
	c.lasts.Add(1)
	return c.Log.Last(ctx, sid)
}

func (c *countingLog) Held(ctx context.Context) (map[string]struct{}, error) {
	h, err := c.Log.Held(ctx)
	if c.afterHeld != nil {
		c.afterHeld(c.Log)
	}
	return h, err
}

func heldSessions(t *testing.T, root string, n int) (sids []string, want map[string][]string) {
	t.Helper()
	want = map[string][]string{}
	for i := range n {
		sid := fmt.Sprintf("0199bbbb-0000-7000-8000-%012x", i)
		lines := []string{header(sid), entry("a", "", "one"), entry("b", "a", "two")}
		writeFile(t, filepath.Join(root, "--p--", fmt.Sprintf("2026-11-30T00-00-00-000Z_%s.jsonl", sid)), lines[0]+"\n"+lines[1]+"\n"+lines[2]+"\n")
		sids, want[sid] = append(sids, sid), lines
	}
	return sids, want
}

// TestFirstReadAsksOnce: the first read of new sessions asks the store
// which subjects hold messages once, not each session's last message
// (twice each before); every line is published once, and a restart
// resumes them all (their subjects are then held, and read one by one).
func TestFirstReadAsksOnce(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	sids, want := heldSessions(t, root, 20)
	c := &countingLog{}
	n := startNodeWith(t, root, state, Options{}, func(tl *Tailer) { c.Log = tl.log; tl.log = c })
	<-n.tailer.Ready()
	for _, sid := range sids {
		n.waitLines(sid, want[sid])
	}
	if got := c.lasts.Load(); got != 0 {
		t.Errorf("first read of %d new sessions read a last message %d times, want 0", len(sids), got)
	}
	n.stop()

	c2 := &countingLog{}
	n2 := startNodeWith(t, root, state, Options{}, func(tl *Tailer) { c2.Log = tl.log; tl.log = c2 })
	<-n2.tailer.Ready()
	for _, sid := range sids {
		if got := n2.lines(sid); !equalStrings(got, want[sid]) {
			t.Errorf("after a restart %s holds %q, want %q", sid, got, want[sid])
		}
	}
	if c2.lasts.Load() < int64(len(sids)) {
		t.Errorf("restart read %d last messages for %d held sessions", c2.lasts.Load(), len(sids))
	}
}

// TestFirstReadHeldStale: a subject written after the snapshot (an erase,
// another writer) is believed empty; the session's first publish states
// expected sequence 0, fails, and the session reads its subject again:
// its lines are stored once each, after the other writer's.
func TestFirstReadHeldStale(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	sids, want := heldSessions(t, root, 3)
	foreign := `{"type":"custom","id":"zz","parentId":null,"timestamp":"2026-11-29T23:08:17.000Z"}`
	c := &countingLog{afterHeld: func(l Log) {
		line := eventlog.NewLine([]byte(foreign), "zz", "", "custom", "--p--/other.jsonl", int64(len(foreign)+1))
		if _, _, err := l.Publish(context.Background(), sids[1], 0, []eventlog.Line{line}); err != nil {
			t.Errorf("other writer: %v", err)
		}
	}}
	n := startNodeWith(t, root, state, Options{}, func(tl *Tailer) { c.Log = tl.log; tl.log = c })
	n.waitLines(sids[1], append([]string{foreign}, want[sids[1]]...))
	for _, sid := range []string{sids[0], sids[2]} {
		n.waitLines(sid, want[sid])
	}
	// Only a failed publish (alone or in a group) makes a session read
	// its last message in a first read of new sessions.
	if c.lasts.Load() == 0 {
		t.Errorf("the stale belief was never corrected from the store")
	}
}

func TestHeldAtStartEmpty(t *testing.T) {
	var h heldAtStart
	if h.empty("a", false) {
		t.Fatal("empty before the snapshot was read")
	}
	h.sids = map[string]struct{}{"held": {}}
	if h.empty("held", false) || h.empty("held", true) {
		t.Fatal("a held subject is empty")
	}
	for i := range 2 { // asked twice: a resume check leaves the snapshot as it was
		if !h.empty("new", false) {
			t.Fatalf("a resume check used up the snapshot (check %d)", i+1)
		}
	}
	if !h.empty("new", true) {
		t.Fatal("a new session's first load is not empty")
	}
	if h.empty("new", false) || h.empty("new", true) {
		t.Fatal("empty again after its load: this process may have written to it")
	}
	h.sids["other"] = struct{}{}
	if got := h.take(); len(got) != 3 {
		t.Fatalf("take: %v, want held, new and other", got)
	}
	if h.empty("another", false) {
		t.Fatal("empty after the first read")
	}
}
