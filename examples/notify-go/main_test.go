package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
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

// TestEraseDropsTheSession: an erase event drops what the example keeps
// of the session; a session written again under its id starts its first
// turn at no cost (it added the erased session's unfinished turn).
func TestEraseDropsTheSession(t *testing.T) {
	tr := newTurns("n")
	subj := "pi.evt.n.s1"
	msg := func(id, role, stop string, cost float64) (nats.Header, []byte) {
		return nats.Header{"Pi-Type": []string{"message"}, "Pi-Id": []string{id}},
			fmt.Appendf(nil, `{"type":"message","message":{"role":%q,"stopReason":%q,"provider":"p","model":"m","usage":{"cost":{"total":%g}}}}`, role, stop, cost)
	}
	for _, m := range []struct {
		id, role, stop string
		cost           float64
	}{{"u1", "user", "", 0}, {"a1", "assistant", "toolUse", 1}} {
		h, d := msg(m.id, m.role, m.stop, m.cost)
		if line, ok := tr.add(subj, h, d); ok {
			t.Fatalf("a turn ended early: %s", line)
		}
	}
	// Half of a split line, then the erase.
	tr.add(subj, nats.Header{"Pi-Type": []string{"message"}, "Pi-Chunk": []string{"1/2"}}, []byte(`{"type":`))
	tr.add(subj, nats.Header{"Pi-Type": []string{"erase"}, "Pi-Op": []string{"erase"}}, []byte(`{"op":"erase"}`))
	if len(tr.cost) != 0 || len(tr.chunks) != 0 {
		t.Errorf("after the erase: costs %v, chunks of %d subjects", tr.cost, len(tr.chunks))
	}
	h, d := msg("a2", "assistant", "stop", 0.5)
	line, ok := tr.add(subj, h, d)
	if !ok || !strings.Contains(line, "$0.5 ") {
		t.Errorf("the session written again: %q, want its own turn's $0.5", line)
	}
}
