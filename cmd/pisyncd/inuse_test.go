package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/watch"
)

// TestListenerInUse: a listener whose address another program holds fails
// with the setting that names it and what to do, for the daemon's NATS
// listener (nats-server says it in words) and its HTTP listener (the
// system's error, kept wrapped); other errors are left as they are.
func TestListenerInUse(t *testing.T) {
	held, err := net.Listen("tcp", testenv.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	discard := slog.New(slog.DiscardHandler)
	says := func(what string, err error, setting string) {
		t.Helper()
		for _, w := range []string{setting + " " + addr + " is taken", "set " + setting + " to a free address", "address already in use"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: err %v, want it to say %q", what, err, w)
			}
		}
	}

	cfg := stationConfig(t, "ws-inuse", "")
	cfg.HubURLs, cfg.Listen = nil, addr
	d, err := OpenStore(context.Background(), cfg, discard)
	if err == nil {
		d.Close()
	}
	says("the NATS listener", err, "PISYNC_LISTEN")

	cfg = stationConfig(t, "ws-inuse", "")
	cfg.HubURLs, cfg.HTTPAddr = nil, addr
	d, err = OpenDaemon(context.Background(), cfg, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Run(context.Background())
	says("the HTTP listener", err, "PISYNC_HTTP_ADDR")
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("the HTTP listener's error no longer wraps the system's: %v", err)
	}

	other := errors.New("embedded: something else at " + addr)
	if got := inUse(other, listener{"PISYNC_LISTEN", addr}); got != other {
		t.Errorf("another error was changed: %v", got)
	}
}

// TestSessionsDirInUse: a second daemon over the same sessions dir, with a
// state dir of its own, is refused at start, naming the folder and the
// fix; once the first has stopped, it starts. (Before, it ran and published
// every line a second time under its own node id; until 2026-12-04 the
// refused one left a state dir of its own behind.)
func TestSessionsDirInUse(t *testing.T) {
	discard := slog.New(slog.DiscardHandler)
	first := stationConfig(t, "ws-first", "")
	first.HubURLs = nil
	d, err := OpenDaemon(context.Background(), first, discard)
	if err != nil {
		t.Fatal(err)
	}
	second := stationConfig(t, "ws-second", "")
	second.HubURLs, second.SessionsDir = nil, first.SessionsDir
	d2, err := OpenDaemon(context.Background(), second, discard)
	if err == nil {
		d2.Close()
	}
	says := []string{"PISYNC_SESSIONS_DIR " + first.SessionsDir + " is followed by another pisyncd", "start this one with its PISYNC_STATE_DIR"}
	if runtime.GOOS == "linux" { // the lock's holder, from /proc/locks
		says = append(says, fmt.Sprintf("is followed by another pisyncd (process %d): two", os.Getpid()))
	}
	if err != nil && strings.Count(err.Error(), "followed by another pisyncd") != 1 {
		t.Errorf("it says it twice: %v", err) // a newcomer probe, 2026-12-07
	}
	for _, w := range says {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("a second daemon: err %v, want it to say %q", err, w)
		}
	}
	// Refused, it made nothing (before, its state dir, node id and store).
	if _, err := os.Stat(second.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused daemon's state dir %s: %v, want none", second.StateDir, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err = OpenDaemon(context.Background(), second, discard)
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	d2.Close()
}

// TestSessionsDirThatCannotBeMade: a sessions dir that is missing and
// cannot be made stops the start, saying how to mend it; the daemon
// warned that it could not be locked, said it was running, and then
// stopped on the tailer's error.
func TestSessionsDirThatCannotBeMade(t *testing.T) {
	cfg := stationConfig(t, "ws-nodir", "")
	cfg.HubURLs = nil
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.SessionsDir = filepath.Join(file, "sessions")
	d, err := OpenDaemon(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		d.Close()
	}
	if !errors.Is(err, watch.ErrSessionsDir) {
		t.Fatalf("OpenDaemon: %v, want %v", err, watch.ErrSessionsDir)
	}
	if _, serr := os.Stat(cfg.StateDir); serr == nil {
		if ents, _ := os.ReadDir(cfg.StateDir); len(ents) > 0 {
			t.Errorf("the refused start left %d files in the state dir", len(ents))
		}
	}
}
