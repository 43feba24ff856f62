package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// TestStatusWhileStarting: while a daemon holds the state dir but has not
// opened its control socket yet (a first start waiting for its store on a
// full disk), status and the commands that read say that it is starting,
// with its pid, instead of "not running: start it", which sent the user
// to start a second one; ls does not try to open the store it holds.
// With nothing holding the state dir, status still says not running.
func TestStatusWhileStarting(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, "state")
	env := []string{"PISYNC_SESSIONS_DIR=" + filepath.Join(home, "sessions"), "PISYNC_STATE_DIR=" + state, "PISYNC_LOG_LEVEL=warn"}
	if err := os.MkdirAll(filepath.Join(state, "jetstream"), 0o700); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := runCmd(t, env, &out, "status"); code != 1 || !strings.Contains(out.String(), "pisyncd is not running") {
		t.Fatalf("status with nothing holding the state dir: exit %d: %s", code, out.String())
	}
	// This process holds the lock as a starting daemon does: a flock on
	// state/lock, and its pid in it.
	f, err := os.OpenFile(filepath.Join(state, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := fsutil.TryLock(f); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	if _, err := f.WriteString(pid + "\n"); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"status", "ls"} {
		out.Reset()
		code := runCmd(t, env, &out, cmd)
		if got := out.String(); code != 1 || !strings.Contains(got, "pisyncd is starting: pid "+pid+" holds the state dir") || strings.Contains(got, "not running") {
			t.Errorf("%s while a daemon starts: exit %d: %s", cmd, code, got)
		}
	}
}
