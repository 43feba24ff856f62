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
	r := sevenLinesOnTwo(t, "0199bbbb-0000-7000-8000-0000000000f7")
	r.cutAfter(t, 3)
	r.next(t)
}

// TestReplicaCutWhileStopped: B's replica cut short while B's daemon was
// stopped (restored from an older copy, say) gets its lines back when B
// starts again, and a later line whose parent was in the part cut off is
// written after it. Nothing in memory knows the file's old size then: the
// hole is found against PI_ALL. Before, the next line went in as an orphan
// after the hole.
func TestReplicaCutWhileStopped(t *testing.T) {
	r := sevenLinesOnTwo(t, "0199bbbb-0000-7000-8000-0000000000f8")
	r.b.stop()
	r.cutAfter(t, 3)
	r.b.start()
	r.next(t)
}

// cutReplica is a session of eight lines written on A, its first seven
// copied to B.
type cutReplica struct {
	b            *station
	aPath, bPath string
	want         []string
}

func sevenLinesOnTwo(t *testing.T, sid string) *cutReplica {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	rel := filepath.Join("--home-ann-proj--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	r := &cutReplica{b: b, aPath: filepath.Join(a.cfg.SessionsDir, rel), bPath: filepath.Join(b.cfg.SessionsDir, rel)}
	os.MkdirAll(filepath.Dir(r.aPath), 0o700)
	r.want = []string{hdrLine(sid, "/home/ann/proj")}
	parent := ""
	for i := range 8 {
		id := fmt.Sprintf("t%d", i)
		r.want = append(r.want, msgLine(id, parent, fmt.Sprintf("line %d", i)))
		parent = id
	}
	for _, l := range r.want[:7] {
		appendLine(t, r.aPath, l)
	}
	waitUntil(t, 30*time.Second, r.bHolds(7))
	return r
}

// bHolds reports whether B's file is the session's first n lines.
func (r *cutReplica) bHolds(n int) func() (bool, string) {
	return func() (bool, string) {
		got, err := os.ReadFile(r.bPath)
		l := splitLines(string(got))
		return err == nil && strings.Join(l, "\n") == strings.Join(r.want[:n], "\n"), fmt.Sprintf("B's file: %v %q", err, l)
	}
}

// cutAfter cuts B's file after its first n lines.
func (r *cutReplica) cutAfter(t *testing.T, n int) {
	data, _ := os.ReadFile(r.bPath)
	keep := len(strings.Join(r.want[:n], "\n")) + 1
	if err := os.WriteFile(r.bPath, data[:keep], 0o600); err != nil {
		t.Fatal(err)
	}
}

// next writes A's eighth line, whose parent was cut off B's file, and
// waits for B's file to hold all eight, none published by B.
func (r *cutReplica) next(t *testing.T) {
	appendLine(t, r.aPath, r.want[7])
	waitUntil(t, 30*time.Second, r.bHolds(8))
	if got := r.b.d.tailer.Stats().LinesPublished; got != 0 {
		t.Fatalf("B published %d lines of its own", got)
	}
}

// TestTruncatedMappedReplicaIsFilledAgain: as TestTruncatedReplicaIsFilledAgain,
// B mapping A's folders (PISYNC_PATH_MAP), so that B's replica starts with
// the header mapped, not the one in PI_ALL. Before, no line of PI_ALL was
// of the replica's form (its header's hash), nothing was written back, and
// A's next line waited for its parent for good.
func TestTruncatedMappedReplicaIsFilledAgain(t *testing.T) {
	sid := "0199bbbb-0000-7000-8000-0000000000f9"
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "/home/ann=/Users/ann")
	name := "2026-11-30T00-00-00-000Z_" + sid + ".jsonl"
	aPath := filepath.Join(a.cfg.SessionsDir, "--home-ann-proj--", name)
	bPath := filepath.Join(b.cfg.SessionsDir, "--Users-ann-proj--", name)
	os.MkdirAll(filepath.Dir(aPath), 0o700)
	want := []string{hdrLine(sid, "/home/ann/proj")}
	parent := ""
	for i := range 8 {
		id := fmt.Sprintf("t%d", i)
		want = append(want, msgLine(id, parent, fmt.Sprintf("line %d", i)))
		parent = id
	}
	bHolds := func(n int) func() (bool, string) {
		return func() (bool, string) {
			got, err := os.ReadFile(bPath)
			l := splitLines(string(got))
			return err == nil && len(l) == n && strings.Join(l[1:], "\n") == strings.Join(want[1:n], "\n"), fmt.Sprintf("B's file: %v %q", err, l)
		}
	}
	for _, l := range want[:7] {
		appendLine(t, aPath, l)
	}
	waitUntil(t, 30*time.Second, bHolds(7))
	data, _ := os.ReadFile(bPath)
	l := splitLines(string(data))
	if !strings.Contains(l[0], "/Users/ann/proj") {
		t.Fatalf("B's header %s", l[0])
	}
	keep := len(strings.Join(l[:3], "\n")) + 1
	if err := os.WriteFile(bPath, data[:keep], 0o600); err != nil {
		t.Fatal(err)
	}
	appendLine(t, aPath, want[7])
	waitUntil(t, 30*time.Second, bHolds(8))
}
