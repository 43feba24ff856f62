package replicate

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestWrittenLinesLeaveTheQueue: the lines a write takes are let go of,
// not kept in the queue's array past its length: filtered in place, the
// array held every line written, bytes and all, for the whole run, and a
// catch-up of 160,000 lines outgrew the memory budget (a probe,
// 2026-12-07). A line that still waits stays.
func TestWrittenLinesLeaveTheQueue(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s1.jsonl")
	writeTestFile(t, p, hdrS1+"\n"+entA+"\n")
	h := newBusyHarness(t, p, time.Millisecond, nil)
	line := func(id, parent string) *eventlog.Event {
		raw := fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"message":{}}`, id, parent)
		return &eventlog.Event{Node: "A", SID: "s1", Type: "message", ID: id, ParentID: parent, Raw: []byte(raw), Sha: sha256.Sum256([]byte(raw))}
	}
	// b and c can go; d waits for its parent x, which another line of
	// the session names (seen) but has not come.
	h.s.seen["x"] = claim{node: "A"}
	h.s.queue = []*eventlog.Event{line("b", "a"), line("d", "x"), line("c", "b")}
	taken := h.r.writable(h.s, h.s.file)
	if len(taken) != 2 || len(h.s.queue) != 1 || h.s.queue[0].ID != "d" {
		t.Fatalf("taken %d, queue %d", len(taken), len(h.s.queue))
	}
	for i, ev := range h.s.queue[len(h.s.queue):cap(h.s.queue)] {
		if ev != nil {
			t.Errorf("the queue's array still holds line %s at %d", ev.ID, len(h.s.queue)+i)
		}
	}
	h.s.seen["x"] = claim{}
	h.s.queue = append(h.s.queue, line("x", "a"))
	if taken := h.r.writable(h.s, h.s.file); len(taken) != 2 || h.s.queue != nil {
		t.Errorf("taken %d, queue %v", len(taken), h.s.queue)
	}
}
