package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

// TestEncryptedEraseWhileAway: with end-to-end encryption, a session A
// began and B continued is erased on A while B is away, so B's key
// messages of it are still on the hub. A workstation that joins then
// passes over A's lines as erased, and still takes A's erase event, which
// takes B's line too: nothing of the session is copied there. Before, A's
// lines passed over gave A no authority over the session there: its erase
// was refused ("from a node that never wrote the session") and B's line,
// secret and all, stayed in the newcomer's store and search index.
func TestEncryptedEraseWhileAway(t *testing.T) {
	hub := startTestHub(t)
	ring := keyring.New(time.Now())
	a := e2eStation(t, "ws-a", hub.url(), ring)
	b := e2eStation(t, "ws-b", hub.url(), ring)

	marker := randomHex(t, 64)
	sid := "0199eeee-0000-7000-8000-" + randomHex(t, 12)
	p := filepath.Join(a.cfg.SessionsDir, "--sec-away--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	os.MkdirAll(filepath.Dir(p), 0o700)
	appendLine(t, p, hdrLine(sid, "/sec/away"))
	appendLine(t, p, msgLine("e0000001", "", "from A"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return fileText(e2eFile(b, sid)) == fileText(p), "B's copy"
	})
	appendLine(t, e2eFile(b, sid), msgLine("e0000002", "e0000001", "B's secret "+marker))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return fileText(p) == fileText(e2eFile(b, sid)), "A's copy of B's line"
	})
	b.stop()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := eraseViaDaemon(ctx, a.cfg, sid); err != nil {
		t.Fatal(err)
	}
	tok := seal.Token(ring, sid)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		_, events := hub.hubLines(t, tok)
		return events == 1, fmt.Sprintf("%d erase events on the hub", events)
	})

	d := e2eStation(t, "ws-d", hub.url(), ring)
	sid2, p2 := writeLaterSession(t, a)
	waitUntil(t, 60*time.Second, func() (bool, string) {
		st, _ := d.status()
		return fileText(e2eFile(d, sid2)) == fileText(p2) && st.Replicator != nil && st.Replicator.Erased == 1,
			fmt.Sprintf("D: replicator %+v admission %+v", st.Replicator, st.Admission)
	})
	st, err := d.status()
	if err != nil || st.Admission == nil {
		t.Fatal(err)
	}
	if n := st.Admission.ByOrigin["ws-a"].ByReason[admit.NoAuthority]; n != 0 {
		t.Errorf("D refused A's erase for want of authority: %+v", st.Admission.ByOrigin)
	}
	if _, err := os.Stat(e2eFile(d, sid)); err == nil {
		t.Error("D wrote the erased session")
	}
	d.stop()
	if hits := grepTree(d.cfg.StateDir, marker[:24]); len(hits) > 0 {
		t.Errorf("D's store holds B's secret in %v", hits)
	}
}

// TestEncryptionMetrics: the metrics show the team key's state: its keys,
// a keyring file that cannot be read, and forwarding held back for it
// (before, only the sessions held for another node's key had a metric).
func TestEncryptionMetrics(t *testing.T) {
	hub := startTestHub(t)
	a := e2eStation(t, "ws-a", hub.url(), keyring.New(time.Now()))
	if got := metricValue(t, a, "pisyncd_encryption_team_keys"); got != 1 {
		t.Errorf("pisyncd_encryption_team_keys = %v, want 1", got)
	}
	if err := os.Chmod(a.cfg.KeyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	// The running daemon keeps sealing with the keys it read; the file's
	// error shows. After a restart it has none, and forwarding waits.
	waitUntil(t, 30*time.Second, func() (bool, string) {
		v := metricValue(t, a, "pisyncd_encryption_keyring_error")
		return v == 1, fmt.Sprintf("pisyncd_encryption_keyring_error = %v", v)
	})
	a.stop()
	a.start()
	writeSession(t, a, "0199f000-0000-7000-8000-00000000metr", 1)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		keys, waits := metricValue(t, a, "pisyncd_encryption_team_keys"), metricValue(t, a, "pisyncd_encryption_forwarding_waits")
		return keys == 0 && waits == 1, fmt.Sprintf("keys %v, forwarding waits %v", keys, waits)
	})
}
