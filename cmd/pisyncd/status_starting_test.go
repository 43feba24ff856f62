package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/fsutil"
	"github.com/pisyncd/pisyncd/internal/testenv"
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

// TestFirstStartOnFullDisk: a first start whose state dir's disk is full
// cannot write its node id, so it holds no state dir yet; it holds the
// sessions dir while it waits. Status says it is starting (it said "not
// running: start it"), a second daemon started as told is refused at once
// (it waited beside the first, both holding nothing), and the first runs
// once space is freed.
func TestFirstStartOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	home := t.TempDir()
	disk := filepath.Join(home, "disk")
	testenv.Tmpfs(t, disk, 4<<20)
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(disk, "state")
	env := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_LOG_LEVEL=info"}
	free := testenv.Fill(t, disk)
	p := startDaemonProc(t, env)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		text := stderrText(p)
		return strings.Contains(text, "disk is full; pisyncd starts once it takes writes again"), text
	})
	var out bytes.Buffer
	pid := strconv.Itoa(p.cmd.Process.Pid)
	if code := runCmd(t, env, &out, "status"); code != 1 || !strings.Contains(out.String(), "pisyncd is starting: pid "+pid+" holds the sessions dir") {
		t.Errorf("status while the first start waits: exit %d: %s", code, out.String())
	}
	out.Reset()
	if code := runCmd(t, env, &out, "run"); code == 0 || !strings.Contains(out.String(), "is followed by another pisyncd") {
		t.Errorf("a second daemon: exit %d: %s", code, out.String())
	}
	free()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		out.Reset()
		code := runCmd(t, env, &out, "status")
		return code == 0, out.String()
	})
	p.kill(t, syscall.SIGTERM)
}

// TestStatusOfADaemonWithAnotherStateDir: a daemon runs with a state dir
// the command is not given (a service whose env file sets
// PISYNC_STATE_DIR, asked from a shell that does not). The command names
// the daemon's state dir and the setting to use; it said the daemon was
// starting and waited for a full disk.
func TestStatusOfADaemonWithAnotherStateDir(t *testing.T) {
	home := t.TempDir()
	sessions := filepath.Join(home, "sessions")
	daemonState, shellState := filepath.Join(home, "service-state"), filepath.Join(home, "state")
	p := startDaemonProc(t, []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + daemonState, "PISYNC_LOG_LEVEL=info"})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		text := stderrText(p)
		return strings.Contains(text, "pisyncd running"), text
	})
	var out bytes.Buffer
	code := runCmd(t, []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + shellState}, &out, "status")
	if got := out.String(); code != 1 || !strings.Contains(got, "with the state dir "+daemonState+", not "+shellState) || !strings.Contains(got, "PISYNC_STATE_DIR="+daemonState) || strings.Contains(got, "full") {
		t.Errorf("status with another state dir: exit %d: %s", code, got)
	}
	p.kill(t, syscall.SIGTERM)
}
