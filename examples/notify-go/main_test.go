package main

import (
	"io"
	"path/filepath"
	"testing"
)

// TestStateDirFromTheEnvironment: PISYNC_STATE_DIR is read as the daemon
// reads it, ~/ included (before, a literal "~" folder was looked in).
func TestStateDirFromTheEnvironment(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("PISYNC_STATE_DIR", "~/.local/state/pisyncd")
	if got, want := defaultContext(), filepath.Join(home, ".local", "state", "pisyncd", "client-context.json"); got != want {
		t.Errorf("context %s, want %s", got, want)
	}
}

// TestHelpIsNoError: -h prints the usage and is no failure.
func TestHelpIsNoError(t *testing.T) {
	if err := run([]string{"-h"}, io.Discard, io.Discard); err != nil {
		t.Errorf("-h: %v", err)
	}
}
