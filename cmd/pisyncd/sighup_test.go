package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
)

// TestSIGHUPStopsTheDaemon: SIGHUP (the terminal the daemon runs in
// closed) stops a workstation daemon as SIGTERM does: exit 0, "pisyncd
// stopped", its control socket removed. Before, SIGHUP's default ended it
// at once (exit 129), with nothing said and its socket left behind.
func TestSIGHUPStopsTheDaemon(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, "state")
	env := []string{"PISYNC_SESSIONS_DIR=" + filepath.Join(home, "sessions"), "PISYNC_STATE_DIR=" + state, "PISYNC_LOG_LEVEL=info", "GOMEMLIMIT="}
	p := startDaemonProc(t, env)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		var out bytes.Buffer
		return runCmd(t, env, &out, "status") == 0, out.String()
	})
	p.kill(t, syscall.SIGHUP)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(p.stderr.String(), "pisyncd stopped") {
		t.Errorf("after SIGHUP: exit %d\n%s", code, p.stderr)
	}
	if _, err := os.Stat(filepath.Join(state, config.ControlSocket)); err == nil {
		t.Error("the control socket is left after SIGHUP")
	}
}

// TestTailEndsWithTheDaemon: a tail following the daemon ends with exit 0
// when the daemon stops, saying so if the daemon did. Before, it failed
// with "tail: projection: worker stopped". A daemon killed (kill -9, a
// crash) ends it with exit 1 and words that say so and what to do, where
// it said "tail: unexpected EOF" (a newcomer probe, 2026-12-07).
func TestTailEndsWithTheDaemon(t *testing.T) {
	t.Run("stopped", func(t *testing.T) { tailEndsWith(t, syscall.SIGTERM) })
	t.Run("killed", func(t *testing.T) { tailEndsWith(t, syscall.SIGKILL) })
}

func tailEndsWith(t *testing.T, sig syscall.Signal) {
	home := t.TempDir()
	sessions := filepath.Join(home, "sessions")
	env := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + filepath.Join(home, "state"), "PISYNC_LOG_LEVEL=warn", "GOMEMLIMIT="}
	p := startDaemonProc(t, env)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		var out bytes.Buffer
		return runCmd(t, env, &out, "status") == 0, out.String()
	})
	var out bytes.Buffer
	tail := startDaemonProcArgs(t, env, &out, "tail")
	tailOut := tail.cmd.Stdout.(*lockedWriter).String
	path := filepath.Join(sessions, "--p--", "2026-11-30T00-00-00-000Z_sid-t.jsonl")
	os.MkdirAll(filepath.Dir(path), 0o700)
	appendLine(t, path, hdrLine("sid-t", "/p"))
	// A line at each look, until tail shows one: it follows from when it
	// is connected, which this test cannot see otherwise.
	n, parent := 0, ""
	waitUntil(t, 20*time.Second, func() (bool, string) {
		if strings.Contains(tailOut(), "followed") {
			return true, ""
		}
		n++
		id := fmt.Sprintf("t%07d", n)
		appendLine(t, path, msgLine(id, parent, "followed"))
		parent = id
		return false, tailOut()
	})
	p.kill(t, sig)
	select {
	case <-tail.done:
	case <-time.After(30 * time.Second):
		tail.cmd.Process.Kill()
		t.Fatal("tail did not end with the daemon")
	}
	code, got := tail.cmd.ProcessState.ExitCode(), tailOut()
	switch {
	case sig == syscall.SIGTERM && (code != 0 || strings.Contains(got, "worker stopped")):
		t.Errorf("tail after the daemon stopped: exit %d\n%s", code, got)
	case sig == syscall.SIGKILL && (code != 1 || !strings.Contains(got, "the daemon was killed or crashed")):
		t.Errorf("tail after the daemon was killed: exit %d\n%s", code, got)
	}
}
