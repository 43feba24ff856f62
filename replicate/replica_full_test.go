package replicate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestReplicaAppendOnFullDisk: a write that a full (real, tmpfs) disk takes
// only part of is taken back, so the file still ends with a whole line and
// the same append passes once space is freed.
func TestReplicaAppendOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	testenv.Tmpfs(t, dir, 1<<20)
	p := filepath.Join(dir, "s1.jsonl")
	writeTestFile(t, p, hdrS1+"\n"+entA+"\n")
	r, err := openReplica(p, "s1")
	if err != nil {
		t.Fatal(err)
	}
	free := testenv.Fill(t, dir)
	// Larger than the page the file's tail may still have room in.
	big := `{"type":"message","id":"b","parentId":"a","message":{"content":"` + strings.Repeat("x", 64<<10) + `"}}`
	before, _ := os.ReadFile(p)
	if err := r.appendLines([][]byte{[]byte(big)}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if after, _ := os.ReadFile(p); string(after) != string(before) {
		t.Fatalf("a failed append left %d bytes behind", len(after)-len(before))
	}
	if busy, _, err := r.busy(0, time.Now()); err != nil || busy {
		t.Fatalf("after a failed append the file reads as busy (%v, %v)", busy, err)
	}
	free()
	if err := r.appendLines([][]byte{[]byte(big)}); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	if after, _ := os.ReadFile(p); string(after) != string(before)+big+"\n" {
		t.Fatal("the file does not hold the appended line after its earlier lines")
	}
}

// TestFullDiskTakesWhatFits: when a full disk refuses a write of several
// lines, the next writes take fewer, so that the lines that fit go in.
// Before, every retry wrote the whole backlog or nothing, and a session
// whose first line fitted waited for room for all of them.
func TestFullDiskTakesWhatFits(t *testing.T) {
	dir := t.TempDir()
	testenv.Tmpfs(t, dir, 1<<20)
	p := filepath.Join(dir, "s1.jsonl")
	writeTestFile(t, p, hdrS1+"\n"+entA+"\n")
	h := newBusyHarness(t, p, 0, nil)
	filler, err := testenv.FillDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, st.Size()-200<<10); err != nil { // 200 KiB free
		t.Fatal(err)
	}
	line := func(id, parent string) string {
		return `{"type":"message","id":"` + id + `","parentId":"` + parent + `","message":{"content":"` + strings.Repeat("x", 120<<10) + `"}}`
	}
	h.queue(line("b", "a"))
	h.queue(line("c", "b"))
	// The test's clock well past every write of the file: it is never
	// taken for a local pi's (PISYNC_IDLE_AFTER).
	h.r.now = func() time.Time { return time.Now().Add(time.Hour) }
	reopen := func() {
		f, err := openReplica(p, "s1")
		if err != nil {
			t.Fatal(err)
		}
		h.s.file, h.r.files[p] = f, f
	}
	if err := h.r.flushSession(context.Background(), h.s); !errors.Is(err, syscall.ENOSPC) {
		got, _ := os.ReadFile(p)
		t.Fatalf("the first write of both lines: %v, want ENOSPC (file %d bytes, %d waiting, deferred %d)", err, len(got), len(h.s.queue), h.r.deferred.Load())
	}
	reopen()
	if err := h.r.flushSession(context.Background(), h.s); err != nil {
		t.Fatalf("the next write, of the line that fits: %v", err)
	}
	got, _ := os.ReadFile(p)
	if !strings.Contains(string(got), `"id":"b"`) || strings.Contains(string(got), `"id":"c"`) || len(h.s.queue) != 1 {
		t.Fatalf("after the second write the file holds b: %v, c: %v; %d lines wait (deferred %d, cap %d, file %d bytes)", strings.Contains(string(got), `"id":"b"`), strings.Contains(string(got), `"id":"c"`), len(h.s.queue), h.r.deferred.Load(), h.s.writeCap, len(got))
	}
	// Room again: the rest goes in, and writes take any number again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := h.r.flushSession(context.Background(), h.s); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !strings.Contains(string(got), `"id":"c"`) || len(h.s.queue) != 0 || h.s.writeCap != 0 {
		t.Fatalf("after space was freed: c written %v, %d waiting, cap %d", strings.Contains(string(got), `"id":"c"`), len(h.s.queue), h.s.writeCap)
	}
}
