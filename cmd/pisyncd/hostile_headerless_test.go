package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// replicatorPosition is the replicator's saved PI_ALL position on s.
func replicatorPosition(t *testing.T, s *station) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := s.d.log.JetStream().KeyValue(ctx, eventlog.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "replicator.position")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(string(e.Value()), 10, 64)
	return n
}

// waiting is the lines waiting in s's replicator, or -1 while it cannot
// say (starting).
func waiting(s *station) int64 {
	st, err := s.status()
	if err != nil || st.Replicator == nil {
		return -1
	}
	return st.Replicator.Waiting
}

// TestHostileHeaderlessLine: eve publishes one line of a session whose
// header she does not send. Its line waits on bob for the header, but no
// longer holds bob's replicator position back: the position passes it once
// ann's later session is written, so a restart does not read PI_ALL again
// from eve's line (before, it stayed before that line for good: every
// restart of every workstation read everything since). The line is not
// lost: after a restart, once eve sends the header, bob's file holds both.
func TestHostileHeaderlessLine(t *testing.T) {
	e := startHostile(t, nil)
	sid := "0199e5e0-0000-7000-8000-0000000000h1"
	orphan := msgLine("h1-1", "", "waits for its header")
	e.eve.Line(t, sid, "h1-1", "", "message", []byte(orphan))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := waiting(e.bob)
		return n == 1, fmt.Sprintf("bob's replicator: %d lines waiting", n)
	})
	honest := "0199f000-0000-7000-8000-0000000after"
	writeSession(t, e.ann, honest, 2)
	waitSecFile(t, e.bob, honest, 3, 30*time.Second)
	last := streamMsgs(t, e.bob.d.log.JetStream(), eventlog.AllStream)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		pos := replicatorPosition(t, e.bob)
		return pos >= last, fmt.Sprintf("bob's replicator position %d, PI_ALL's last %d", pos, last)
	})

	e.bob.stop()
	e.bob.start()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := waiting(e.bob)
		return n == 1, fmt.Sprintf("bob's replicator after a restart: %d lines waiting", n)
	})
	// Status says why they wait (before: a count alone, for good).
	if st, err := e.bob.status(); err == nil {
		var text bytes.Buffer
		if err := printStatus(&text, &st); err != nil || st.Replicator.WaitingForHeader != 1 || !strings.Contains(text.String(), "1 (1 session whose header has not come here)") {
			t.Errorf("bob's status: %v %+v\n%s", err, st.Replicator, text.String())
		}
	}
	// So does its context (before: "session: not a valid pi session").
	var out bytes.Buffer
	if err := writeSessionContext(t.Context(), e.bob.cfg, sid, "", "", &out); err == nil || !strings.Contains(err.Error(), "pisyncd status says why") {
		t.Errorf("bob's context of the session without its header: %v", err)
	}
	eveHeader(t, e, sid, secRel(sid), []byte(hdrLine(sid, "/sec")))
	waitSecFile(t, e.bob, sid, 2, 30*time.Second)
	if got := readLines(secPath(e.bob, sid)); got[1] != orphan {
		t.Errorf("bob's file of eve's session: %q", got)
	}
	writeSession(t, e.ann, "0199f000-0000-7000-8000-0000000last2", 1)
	waitSecFile(t, e.bob, "0199f000-0000-7000-8000-0000000last2", 2, 30*time.Second)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := waiting(e.bob)
		return n == 0, fmt.Sprintf("bob's replicator: %d lines waiting", n)
	})
}
