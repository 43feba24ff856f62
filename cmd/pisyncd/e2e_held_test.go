package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/keyring"
)

// TestHeldSessionReleasedOnce: after a key rotation on A that B has not
// imported yet, B holds A's session aside and copies C's, sealed under the
// old key, past it. Once B imports the new key, the held lines go into
// PI_ALL after C's, although the hub stored them before. Proves that B's
// files then hold every line once, and that a restart of B copies nothing
// again (its position does not go back to the released lines, older on
// the hub) and goes on copying: PI_ALL grows by exactly the lines written
// after it.
func TestHeldSessionReleasedOnce(t *testing.T) {
	hub := startTestHub(t)
	ring := keyring.New(time.Now())
	a := e2eStation(t, "ws-a", hub.url(), ring)
	b := e2eStation(t, "ws-b", hub.url(), ring)
	c := e2eStation(t, "ws-c", hub.url(), ring)

	rotated := rotateKey(t, a)
	sidA := "0199eeee-0001-7000-8000-" + randomHex(t, 12)
	// Three lines, then one of several chunks (an image's size): held
	// and released as one line.
	pa := writeSession(t, a, sidA, 3)
	appendLine(t, pa, msgLine("big", "", strings.Repeat("x", 600<<10)))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := b.status()
		return err == nil && st.Downloader.Held == 1 && slices.Equal(st.Downloader.HeldFor, []string{rotated.Current}), fmt.Sprintf("B's downloader %+v (%v)", st.Downloader, err)
	})
	sidC := "0199eeee-0002-7000-8000-" + randomHex(t, 12)
	writeSession(t, c, sidC, 3)
	waitFile(t, b, sidC, 4)
	if _, err := os.Stat(secPath(b, sidA)); err == nil {
		t.Fatal("B wrote A's session without the new key")
	}

	carryKey(t, a, b)
	waitFile(t, b, sidA, 5)
	if fileText(secPath(b, sidA)) != fileText(pa) {
		t.Fatal("B's file of A's session differs from A's")
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := b.status()
		return err == nil && st.Downloader.Held == 0, fmt.Sprintf("B's downloader %+v (%v)", st.Downloader, err)
	})
	before := streamMsgs(t, b.d.log.JetStream(), eventlog.AllStream)
	if park := streamMsgs(t, b.d.log.JetStream(), eventlog.ParkStream); park != 0 {
		t.Errorf("%s holds %d messages after the release", eventlog.ParkStream, park)
	}

	b.stop()
	b.start()
	sidC2 := "0199eeee-0003-7000-8000-" + randomHex(t, 12)
	writeSession(t, c, sidC2, 2)
	waitFile(t, b, sidC2, 3)
	if after := streamMsgs(t, b.d.log.JetStream(), eventlog.AllStream); after != before+3 {
		t.Errorf("B's PI_ALL went from %d to %d messages over a restart and a session of 3 lines: something was copied twice", before, after)
	}
	// A copy that went back would have met C's sealed lines again, and
	// refused them as replayed.
	if st, err := b.status(); err != nil || st.Downloader.Rejected != 0 || st.Admission.Rejected != 0 {
		t.Errorf("B after its restart: %v, downloader %+v, admission %+v: it read lines again", err, st.Downloader, st.Admission)
	}
	for sid, n := range map[string]int{sidA: 5, sidC: 4} {
		if got := len(splitLines(fileText(secPath(b, sid)))); got != n {
			t.Errorf("B's file of %s has %d lines, want %d", sid, got, n)
		}
	}
}
