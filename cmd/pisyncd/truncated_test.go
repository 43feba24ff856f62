package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTruncatedReplicaIsFilledAgain: a replica cut short (a truncation, a
// restore from an older backup) gets back the lines the machine holds,
// parents first, with the next line from the other machine. Before, the
// hole stayed for good, and a later line whose parent was in it was written
// after a parent the file no longer held.
func TestTruncatedReplicaIsFilledAgain(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")

	sid := "0199bbbb-0000-7000-8000-0000000000f7"
	rel := filepath.Join("--home-ann-proj--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	aPath, bPath := filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
	os.MkdirAll(filepath.Dir(aPath), 0o700)
	want := []string{hdrLine(sid, "/home/ann/proj")}
	parent := ""
	for i := range 8 {
		id := fmt.Sprintf("t%d", i)
		want = append(want, msgLine(id, parent, fmt.Sprintf("line %d", i)))
		parent = id
	}
	for _, l := range want[:7] {
		appendLine(t, aPath, l)
	}
	same := func(n int) func() (bool, string) {
		return func() (bool, string) {
			got, err := os.ReadFile(bPath)
			l := splitLines(string(got))
			return err == nil && strings.Join(l, "\n") == strings.Join(want[:n], "\n"), fmt.Sprintf("B's file: %v %q", err, l)
		}
	}
	waitUntil(t, 30*time.Second, same(7))

	// B's file cut after its third line; then A's next line, whose
	// parent is in the part cut off.
	data, _ := os.ReadFile(bPath)
	keep := len(strings.Join(want[:3], "\n")) + 1
	if err := os.WriteFile(bPath, data[:keep], 0o600); err != nil {
		t.Fatal(err)
	}
	appendLine(t, aPath, want[7])
	waitUntil(t, 30*time.Second, same(8))
	if got := b.d.tailer.Stats().LinesPublished; got != 0 {
		t.Fatalf("B published %d lines of its own", got)
	}
}

// TestReplicaCutWhileStopped: B's replica cut short while B's daemon was
// stopped (restored from an older copy, say) gets its lines back when B
// starts again, and a later line whose parent was in the part cut off is
// written after it. Nothing in memory knows the file's old size then: the
// hole is found against PI_ALL.
func TestReplicaCutWhileStopped(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")

	sid := "0199bbbb-0000-7000-8000-0000000000f8"
	rel := filepath.Join("--home-ann-proj--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	aPath, bPath := filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
	os.MkdirAll(filepath.Dir(aPath), 0o700)
	want := []string{hdrLine(sid, "/home/ann/proj")}
	parent := ""
	for i := range 8 {
		id := fmt.Sprintf("t%d", i)
		want = append(want, msgLine(id, parent, fmt.Sprintf("line %d", i)))
		parent = id
	}
	for _, l := range want[:7] {
		appendLine(t, aPath, l)
	}
	same := func(n int) func() (bool, string) {
		return func() (bool, string) {
			got, err := os.ReadFile(bPath)
			l := splitLines(string(got))
			return err == nil && strings.Join(l, "\n") == strings.Join(want[:n], "\n"), fmt.Sprintf("B's file: %v %q", err, l)
		}
	}
	waitUntil(t, 30*time.Second, same(7))

	b.stop()
	data, _ := os.ReadFile(bPath)
	keep := len(strings.Join(want[:3], "\n")) + 1
	if err := os.WriteFile(bPath, data[:keep], 0o600); err != nil {
		t.Fatal(err)
	}
	b.start()
	appendLine(t, aPath, want[7])
	waitUntil(t, 30*time.Second, same(8))
	if got := b.d.tailer.Stats().LinesPublished; got != 0 {
		t.Fatalf("B published %d lines of its own", got)
	}
}
