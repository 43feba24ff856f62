package main

import (
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestDaemonWaitsForAReadingCommand: a command that reads the store while
// no daemon runs (pisyncd events piped to a pager) holds the state dir.
// A daemon started meanwhile waits for it, saying so, and starts once it
// ends; before, it exited at once, and under its service restarted every
// 2 s until systemd gave up on it. Another command is told which command
// holds the store, not "another pisyncd".
func TestDaemonWaitsForAReadingCommand(t *testing.T) {
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	env := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_NODE_ID=reader-node", "PISYNC_LOG_LEVEL=info"}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	reader, err := openStoreAs(t.Context(), cfg, slog.New(slog.DiscardHandler), "pisyncd events")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()

	ls := startDaemonProcArgs(t, env, nil, "ls")
	var err2 error
	testenv.Within(t, 60*time.Second, "pisyncd ls", func() { err2 = <-ls.done })
	if err2 == nil || !strings.Contains(ls.stderr.String(), "in use by `pisyncd events` (pid") {
		t.Errorf("pisyncd ls while a command reads the store: %v, %q", err2, ls.stderr.String())
	}

	p := startDaemonProcArgs(t, env, nil, "run")
	testenv.WaitFor(t, 60*time.Second, func() (bool, string) {
		p.alive(t)
		return strings.Contains(p.stderr.String(), "waiting for a command that reads the store to end"), p.stderr.String()
	})
	if err := reader.Close(); err != nil {
		t.Fatal(err)
	}
	ctl := controlClient(state)
	testenv.WaitFor(t, 60*time.Second, func() (bool, string) {
		p.alive(t)
		return daemonStatus(ctl).Node == "reader-node", "the daemon answering once the command ended:\n" + p.stderr.String()
	})
	if err := p.kill(t, syscall.SIGINT); err != nil {
		t.Fatalf("stopped with %v, want exit 0", err)
	}
}
