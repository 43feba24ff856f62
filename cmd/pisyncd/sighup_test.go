package main

import (
	"bytes"
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
