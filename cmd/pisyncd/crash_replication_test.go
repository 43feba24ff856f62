package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/keyring"
)

// TestSIGKILLReplication kills both workstations with SIGKILL at random
// moments while pi-like writers append on A, restarts them each time, and
// checks at the end that the hub holds every line of A's files exactly once
// and that B's copies are A's files, byte for byte: the forwarder's and the
// replicator's read positions, written at most once a second
// (eventlog.Position), lag what is done, so every restart re-reads lines
// that went through already, and must neither lose nor repeat one.
func TestSIGKILLReplication(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	hub := startTestHub(t)
	envOf := func(name string) (sessions string, env []string) {
		home := t.TempDir()
		sessions = filepath.Join(home, "sessions")
		return sessions, []string{
			"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + filepath.Join(home, "state"),
			"PISYNC_NODE_ID=" + name, "PISYNC_HUB_URLS=" + hub.url(),
			"PISYNC_RESCAN_INTERVAL=200ms", "PISYNC_IDLE_AFTER=100ms", "PISYNC_LOG_LEVEL=warn",
		}
	}
	aSessions, aEnv := envOf("ws-a")
	bSessions, bEnv := envOf("ws-b")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const sessions = 3
	w := newSessionWriter(t, aSessions, sessions, seed)
	rng := rand.New(rand.NewPCG(seed, 3))

	stop := writeLoop(w, 3*time.Millisecond)
	for k := 0; k < 12; k++ {
		killedRun(t, k, rng, aEnv, bEnv)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	checkCopiesOnce(t, hub, w, aEnv, bEnv, bSessions)
}

// killedRun is run k of both daemons, each killed (SIGKILL) anywhere from
// start-up to well into steady state (positions are written a second
// apart: some kills come after one, most between two).
func killedRun(t *testing.T, k int, rng *rand.Rand, aEnv, bEnv []string) {
	t.Helper()
	a, b := startDaemonProc(t, aEnv), startDaemonProc(t, bEnv)
	for _, p := range []*daemonProc{a, b} {
		select {
		case err := <-p.done:
			t.Fatalf("daemon exited on its own (run %d): %v\n%s", k, err, p.stderr)
		case <-time.After(time.Duration(rng.IntN(1500)) * time.Millisecond):
		}
		p.kill(t, syscall.SIGKILL)
	}
}

// checkCopiesOnce runs both daemons a last time, cleanly, until B's copy
// of each of A's files (written by w) is A's file byte for byte, and then
// checks that the hub holds each of A's lines once. It logs what the
// daemons do, and a failure shows both daemons' status too.
func checkCopiesOnce(t *testing.T, hub *testHub, w *sessionWriter, aEnv, bEnv []string, bSessions string) {
	t.Helper()
	aEnv, bEnv = append(aEnv, "PISYNC_LOG_LEVEL=info"), append(bEnv, "PISYNC_LOG_LEVEL=info")
	a, b := startDaemonProc(t, aEnv), startDaemonProc(t, bEnv)
	defer a.kill(t, syscall.SIGTERM)
	defer b.kill(t, syscall.SIGTERM)
	// The wait is for a stall, not for a speed: it fails once neither the
	// hub's copy of A's lines nor B's copy of the session has grown for a
	// minute. Under load, with -race, the backlog that twelve short runs
	// leave takes minutes to go through (the tailer read it at 500 lines
	// a second, the forwarder sent it at 100 a second, in one such run).
	const stall = time.Minute
	total := 0
	for i, path := range w.files {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		total += strings.Count(string(want), "\n")
		sid := strings.TrimSuffix(filepath.Base(path)[len("2026-11-30T00-00-00-000Z_"):], ".jsonl")
		copyPath := filepath.Join(bSessions, sessionRel(fmt.Sprintf("/crash/%d", i), sid))
		start, moved := time.Now(), time.Now()
		copied, onHub := -1, uint64(0)
		for {
			got, _ := os.ReadFile(copyPath)
			if len(got) >= len(want) {
				if string(got) != string(want) {
					t.Fatalf("session %s: B's copy (%d bytes) is not A's file (%d bytes): %s", sid, len(got), len(want), sameFile(path, copyPath))
				}
				t.Logf("session %s: B's copy complete after %s", sid, time.Since(start).Round(time.Millisecond))
				break
			}
			n, _ := hub.count("pi.up.ws-a.>")
			if len(got) != copied || n != onHub {
				copied, onHub, moved = len(got), n, time.Now()
			}
			if time.Since(moved) > stall {
				t.Fatalf("session %s: B's copy has %d of %d bytes, the hub %d of A's lines, neither moved for %s\nA: %s\nA's status: %s\nB: %s\nB's status: %s",
					sid, len(got), len(want), n, stall, a.stderr, statusText(t, aEnv), b.stderr, statusText(t, bEnv))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	n, err := hub.count("pi.up.ws-a.>")
	if err != nil {
		t.Fatal(err)
	}
	if n != uint64(total) {
		t.Fatalf("the hub holds %d messages of A for %d lines", n, total)
	}
	t.Logf("%d lines in %d sessions: on the hub once each, B's copies equal", total, len(w.files))
}

// TestSIGKILLHeldRelease: A seals its lines (PISYNC_ENCRYPT=on, the team
// key); B has no key, so it holds every session of A's in PI_PARK while
// pi-like writers append on A. Both are killed with SIGKILL at random
// moments, six times so, then six more after B's key file appears, so that
// kills land while B holds lines, releases them, and stores and lets go of
// them. Proves that B's copies end up A's files byte for byte, and the hub
// holds each of A's lines once: a release cut anywhere neither loses nor
// repeats a line.
func TestSIGKILLHeldRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	hub := startTestHub(t)
	teamKey := filepath.Join(t.TempDir(), "team-key.json")
	if err := keyring.Save(teamKey, keyring.New(time.Now())); err != nil {
		t.Fatal(err)
	}
	envOf := func(name, keyFile string) (sessions string, env []string) {
		home := t.TempDir()
		sessions = filepath.Join(home, "sessions")
		return sessions, []string{
			"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + filepath.Join(home, "state"),
			"PISYNC_NODE_ID=" + name, "PISYNC_HUB_URLS=" + hub.url(),
			"PISYNC_ENCRYPT=on", "PISYNC_KEY_FILE=" + keyFile,
			"PISYNC_RESCAN_INTERVAL=200ms", "PISYNC_IDLE_AFTER=100ms", "PISYNC_LOG_LEVEL=warn",
			// Sealed lines do not compress, and under -race the link's
			// compression is slow (stationConfig says why);
			// TestSIGKILLReplication keeps the default.
			"PISYNC_HUB_COMPRESSION=off",
		}
	}
	aSessions, aEnv := envOf("ws-a", teamKey)
	bKey := filepath.Join(t.TempDir(), "team-key.json")
	bSessions, bEnv := envOf("ws-b", bKey)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	w := newSessionWriter(t, aSessions, 3, seed)
	rng := rand.New(rand.NewPCG(seed, 4))

	stop := writeLoop(w, 3*time.Millisecond)
	for k := 0; k < 12; k++ {
		if k == 6 {
			// Before the key comes, B holds what A forwarded of its
			// sessions (if the six runs before were too short for A to
			// forward any, this run makes sure it does).
			a, b := startDaemonProc(t, aEnv), startDaemonProc(t, bEnv)
			waitUntil(t, 30*time.Second, func() (bool, string) {
				var st struct {
					Downloader struct {
						Held int `json:"sessionsHeld"`
					} `json:"downloader"`
				}
				out := statusText(t, bEnv)
				return json.Unmarshal([]byte(out), &st) == nil && st.Downloader.Held > 0, "B holds: " + out
			})
			a.kill(t, syscall.SIGKILL)
			b.kill(t, syscall.SIGKILL)
			key, err := os.ReadFile(teamKey)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bKey, key, 0o600); err != nil { // as key import writes it
				t.Fatal(err)
			}
		}
		killedRun(t, k, rng, aEnv, bEnv)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkCopiesOnce(t, hub, w, aEnv, bEnv, bSessions)
}

// statusText is what `pisyncd status --json` prints for the daemon of env,
// or why it printed nothing.
func statusText(t *testing.T, env []string) string {
	var out bytes.Buffer
	runCmd(t, env, &out, "status", "--json")
	return out.String()
}
