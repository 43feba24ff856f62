package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/projection"
)

// TestLsForkedNoteIsTerminalSafe: a header's parentSession is session
// text (a hostile file can put escape sequences in it); the table's note
// prints its control characters as spaces, as search does.
func TestLsForkedNoteIsTerminalSafe(t *testing.T) {
	e := projection.CatalogEntry{
		SessionID: "s1", Nodes: []string{"a"}, Forked: true,
		ParentSession: "/x\x1b]0;owned\x07\x1b[2J\u202e.jsonl",
	}
	var out bytes.Buffer
	if err := printCatalog(&out, []projection.CatalogEntry{e}); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07\u202e") {
		t.Fatalf("control characters reach the terminal: %q", out.String())
	}
	if !strings.Contains(out.String(), "s1: forked from /x ]0;owned  [2J .jsonl") {
		t.Fatalf("note: %q", out.String())
	}
}
