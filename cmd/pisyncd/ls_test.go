package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/replicate"
	"github.com/pisyncd/pisyncd/watch"
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
	// A session id is any text a header holds, a newline too.
	hostileID := projection.CatalogEntry{SessionID: "X\n" + hostile + "RED", Nodes: []string{"a"}, Deleted: true, DeletedOn: []string{"a"}}
	// A timestamp is any string too (pisyncd search prints an entry's).
	noName.Updated = hostile
	var out bytes.Buffer
	if err := printCatalog(&out, []projection.CatalogEntry{e, noName, hostileID}); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07\u202e") || strings.Contains(out.String(), "X\n") {
		t.Fatalf("control characters reach the terminal: %q", out.String())
	}
	if !strings.Contains(out.String(), "s1: forked from /x ]0;owned  [2J .jsonl") {
		t.Fatalf("note: %q", out.String())
	}
}

// TestTailAndEventsAreTerminalSafe: pisyncd tail and pisyncd events print
// a line's text, ids, type and file name, all of them anyone's (another
// machine's session, a page an agent read), with their control characters
// as spaces. They reached the terminal as they were: a message set the
// clipboard (OSC 52) and cleared the screen of whoever followed the tail.
func TestTailAndEventsAreTerminalSafe(t *testing.T) {
	const hostile = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\r\u202e"
	var b bytes.Buffer
	printTailEntry(&b, &projection.TailEntry{Session: "s1" + hostile, ID: "e1" + hostile, ParentID: "p" + hostile, Type: "message",
		Entry: []byte(`{"type":"message","message":{"role":"user\u001b[31m","content":"hi \u001b]52;c;ZXZpbA==\u0007 \u001b[2J there"}}`)})
	printTailEntry(&b, &projection.TailEntry{Session: "s1", Op: "delete", File: "--x" + hostile + "--/a.jsonl"})
	if err := eventPrinter(&b, false)(eventJSON{Seq: 1, Type: "message" + hostile, EntryID: "e1" + hostile, ParentID: "p" + hostile}); err != nil {
		t.Fatal(err)
	}
	for _, r := range b.String() {
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r == '\u202e') {
			t.Fatalf("printed %U: %q", r, b.String())
		}
	}
	if !strings.Contains(b.String(), "there") {
		t.Errorf("the text is gone: %q", b.String())
	}
}

// TestTailNamesControlEventsAsEventsDoes: tail names a tombstone by its
// type, as events and --type do, not by its op ("delete").
func TestTailNamesControlEventsAsEventsDoes(t *testing.T) {
	var b bytes.Buffer
	printTailEntry(&b, &projection.TailEntry{Session: "s1", Type: "tombstone", Op: "delete", File: "--x--/a.jsonl"})
	printTailEntry(&b, &projection.TailEntry{Session: "s1", Type: "restore", Op: "restore", File: "--x--/a.jsonl"})
	if got := b.String(); got != "s1\ttombstone\t--x--/a.jsonl\t-\t\ns1\trestore\t--x--/a.jsonl\t-\t\n" {
		t.Errorf("tail printed %q", got)
	}
	if !slices.Contains(tailTypes, "restore") {
		t.Error("--type restore is not one pisyncd knows")
	}
}

// TestStatusIsTerminalSafe: pisyncd status lists entry id collisions, and
// the colliding id is the other machine's choice (the hostile suite makes
// one); it, like every value, is printed without control characters.
func TestStatusIsTerminalSafe(t *testing.T) {
	const hostile = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\r\u202e"
	st := &Status{Forwarder: &eventlog.ForwarderStats{}, Downloader: &eventlog.DownloaderStats{}, Replicator: &replicate.Stats{CollisionsList: []replicate.Collision{{Session: "s1", ID: "e1" + hostile, Nodes: [2]string{"a", "b"}}}},
		Tailer: watch.Stats{LastError: "open --x" + hostile + "--/a.jsonl: denied"}}
	var b bytes.Buffer
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	for _, r := range b.String() {
		if r != '\n' && (r < 0x20 || r == 0x7f || r == '\u202e') {
			t.Fatalf("printed %U: %q", r, b.String())
		}
	}
	if !strings.Contains(b.String(), "entry e1 ") {
		t.Errorf("the collision is not listed: %q", b.String())
	}
}

// TestNotesSayWhatHappened: a collision within one node's lines says so,
// not "claimed by a and a"; a session deleted on some of its machines
// says where; a store that failed and has not recovered yet
// says so, not "recovered 0 (last 0001-01-01…)".
func TestNotesSayWhatHappened(t *testing.T) {
	notes := catalogNotes(projection.CatalogEntry{SessionID: "s1", Collisions: []projection.Collision{{ID: "e1", Nodes: [2]string{"ann", "ann"}}, {ID: "e2", Nodes: [2]string{"ann", "bob"}}}})
	if strings.Join(notes, "|") != "s1: entry e1 written twice by ann, with other bytes|s1: entry e2 claimed by ann and bob" {
		t.Errorf("notes %q", notes)
	}
	// Deleted on one machine of two: the other keeps it.
	notes = catalogNotes(projection.CatalogEntry{SessionID: "s2", Nodes: []string{"wsA", "wsB"}, DeletedOn: []string{"wsB"}})
	if strings.Join(notes, "|") != "s2: deleted on wsB, not on wsA" {
		t.Errorf("notes %q", notes)
	}
	var b bytes.Buffer
	st := &Status{Store: &embedded.StoreStats{State: embedded.StoreOK, WriteFailures: 3}}
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "event store write failures            3, not recovered yet\n") {
		t.Errorf("status:\n%s", b.String())
	}
}

// TestLsFollowsAMovedFile: a session file renamed (or moved into another
// project folder) publishes no line, and ls showed the path of its last
// line until the next one; it shows where the tailer follows it now.
func TestLsFollowsAMovedFile(t *testing.T) {
	hub := startTestHub(t)
	s := runStation(t, stationConfig(t, "ws-a", hub.url()))
	const sid = "0199eeee-0000-7000-8000-0000000000e1"
	p := writeSession(t, s, sid, 2)
	file := func() (string, error) {
		cat, err := s.d.proj.Catalog(t.Context())
		if err != nil {
			return "", err
		}
		var rr httptest.ResponseRecorder
		rr.Body = new(bytes.Buffer)
		s.d.proj.Handler().ServeHTTP(&rr, httptest.NewRequest("GET", "/ls", nil))
		var ls []projection.CatalogEntry
		if err := json.Unmarshal(rr.Body.Bytes(), &ls); err != nil {
			return "", fmt.Errorf("ls: %w (%d entries in the catalog)", err, len(cat))
		}
		for _, e := range ls {
			if e.SessionID == sid {
				return e.File + " " + e.Files.Get("ws-a"), nil
			}
		}
		return "", nil
	}
	rel := func(p string) string { r, _ := filepath.Rel(s.cfg.SessionsDir, p); return filepath.ToSlash(r) }
	waitUntil(t, 30*time.Second, func() (bool, string) {
		f, err := file()
		return f == rel(p)+" "+rel(p), fmt.Sprintf("ls: %q (%v), want %s", f, err, rel(p))
	})
	moved := filepath.Join(s.cfg.SessionsDir, "--elsewhere--", filepath.Base(p))
	if err := os.MkdirAll(filepath.Dir(moved), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, moved); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		f, err := file()
		return f == rel(moved)+" "+rel(moved), fmt.Sprintf("ls after the move: %q (%v), want %s", f, err, rel(moved))
	})
}
