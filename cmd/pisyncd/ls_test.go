package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/projection"
)

// TestLsForkedNoteIsTerminalSafe: a header's parentSession, a session's
// name, cwd, error and colliding entry ids are session text (a hostile file
// can put escape sequences in them); the table prints their control
// characters as spaces, as search does.
func TestLsForkedNoteIsTerminalSafe(t *testing.T) {
	const hostile = "\x1b]0;owned\x07\x1b[2J\u202e"
	e := projection.CatalogEntry{
		SessionID: "s1", Nodes: []string{"a"}, Forked: true,
		ParentSession: "/x" + hostile + ".jsonl",
		Name:          "name" + hostile, Error: "bad" + hostile,
		Collisions: []projection.Collision{{ID: "id" + hostile, Nodes: [2]string{"a", "b"}}},
	}
	noName := e
	noName.SessionID, noName.Name, noName.Cwd = "s2", "", "/cwd"+hostile
	var out bytes.Buffer
	if err := printCatalog(&out, []projection.CatalogEntry{e, noName}); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07\u202e") {
		t.Fatalf("control characters reach the terminal: %q", out.String())
	}
	if !strings.Contains(out.String(), "s1: forked from /x ]0;owned  [2J .jsonl") {
		t.Fatalf("note: %q", out.String())
	}
}
