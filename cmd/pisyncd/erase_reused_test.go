package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestErasedPastStaysOutOfAReusedSession: a session erased and written
// again under its id gets no lines of its erased past. A machine that kept
// the session (offline at the erase; eve here, one line below an erased
// entry and one below that) sends them after the new session began: they
// were written into it on every other machine, a second root whose last
// entry pi resumed, erased text and all (a probe, 2026-12-07). The new
// session's own lines go on arriving.
func TestErasedPastStaysOutOfAReusedSession(t *testing.T) {
	e := startHostile(t, nil)
	sid := "0199d000-0000-7000-8000-0000000000e5"
	p := writeSession(t, e.ann, sid, 2) // 0199-0, 0199-1
	waitSecFile(t, e.bob, sid, 3, 30*time.Second)
	if _, err := eraseViaDaemon(context.Background(), e.ann.cfg, sid); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		_, err := os.Stat(secPath(e.bob, sid))
		return os.IsNotExist(err), fmt.Sprintf("bob's copy: %v", err)
	})

	// The session written again under its id.
	again := []string{hdrLine(sid, "/sec"), msgLine("n1", "", "a fresh start")}
	mustWriteLines(t, p, again)
	waitSecFile(t, e.bob, sid, 2, 30*time.Second)
	st0, _ := e.bob.status()

	// The erased past, from a machine that kept it.
	e.eve.Line(t, sid, "kept-1", "0199-1", "message", []byte(msgLine("kept-1", "0199-1", "ERASED PAST continued")))
	e.eve.Line(t, sid, "kept-2", "kept-1", "message", []byte(msgLine("kept-2", "kept-1", "ERASED PAST, below it")))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := e.bob.status()
		return err == nil && st.Replicator.ErasedLines >= st0.Replicator.ErasedLines+2,
			fmt.Sprintf("bob: %d lines passed over as erased, want %d (%v)", st.Replicator.ErasedLines, st0.Replicator.ErasedLines+2, err)
	})
	appendLine(t, p, msgLine("n2", "n1", "the new session goes on"))
	waitSecFile(t, e.bob, sid, 3, 30*time.Second)
	got := strings.Join(readLines(secPath(e.bob, sid)), "\n")
	if strings.Contains(got, "ERASED PAST") {
		t.Errorf("bob's copy of the new session holds its erased past:\n%s", got)
	}
	if st, err := e.bob.status(); err != nil || st.Replicator.Waiting != 0 {
		t.Errorf("bob: %d remote lines waiting (%v)", st.Replicator.Waiting, err)
	}
}
