package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestRunWithoutTheHubOnce: a workstation started once without its hub
// settings (a new shell without the variables, a service without its
// environment file) reads the files the replicator copied from other
// machines; it publishes none of their lines as its own, and the next
// start with the hub forwards nothing of them. Before, it published every
// copied line under its own node, forwarded them all at the next start
// with the hub, and the other machines listed the session as written on
// both (a newcomer probe, 2026-12-07).
func TestRunWithoutTheHubOnce(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	sid := "0199cccc-0000-7000-8000-0000000000f1"
	rel := sessionRel("/w/once", sid)
	aPath, bPath := filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
	mustWriteLines(t, aPath, []string{hdrLine(sid, "/w/once"), msgLine("a1", "", "begun on A"), msgLine("a2", "a1", "more")})
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[rel]) == 3, "B's copy" })

	b.stop()
	hubURLs := b.cfg.HubURLs
	b.cfg.HubURLs = nil
	b.start()
	// A line of B's own after the copied ones: once it is published, the
	// copied lines before it were decided on.
	appendLine(t, bPath, msgLine("b1", "a2", "B's own, without the hub"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := b.status()
		return err == nil && st.Tailer.LinesPublished >= 1, fmt.Sprintf("B's tailer %+v %v", st.Tailer, err)
	})
	st, err := b.status()
	if err != nil || st.Tailer.LinesPublished != 1 {
		t.Fatalf("B without the hub published %d lines, want 1, its own (%v)", st.Tailer.LinesPublished, err)
	}

	b.stop()
	b.cfg.HubURLs = hubURLs
	b.start()
	want := []string{hdrLine(sid, "/w/once"), msgLine("a1", "", "begun on A"), msgLine("a2", "a1", "more"), msgLine("b1", "a2", "B's own, without the hub")}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		got := a.sessionFiles()[rel]
		return len(got) == len(want), fmt.Sprintf("A's file %q", got)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := subjectsCount(ctx, a.d.log.JetStream(), eventlog.AllStream, eventlog.AllSubject("ws-b", sid))
	if err != nil || n != 1 {
		t.Errorf("A's PI_ALL holds %d lines of B's, want 1 (%v)", n, err)
	}
	if got := a.sessionFiles()[rel]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("A's file:\n%q\nwant\n%q", got, want)
	}
	if _, err := os.Stat(bPath); err != nil {
		t.Fatal(err)
	}
}
