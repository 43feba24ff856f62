package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestEventsOfASessionBegunElsewhere: events lists a session another
// machine began, which ls lists and context reads here: the lines this
// machine copied, from their node, after this machine's own. Before, it
// read this machine's log alone and said the session was not here. Both
// from the running daemon and from the store when none runs.
func TestEventsOfASessionBegunElsewhere(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	sid := "0199eeee-0000-7000-8000-0000000000e1"
	rel := sessionRel("/work/ev", sid)
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, rel), append([]string{hdrLine(sid, "/work/ev")}, chain("a", "", 2, "from A")...))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(b.sessionFiles()[rel])
		return n == 3, fmt.Sprintf("B has %d lines", n)
	})
	appendLine(t, filepath.Join(b.cfg.SessionsDir, rel), msgLine("b1", "a00001", "from B"))
	// A line of three chunks: without --json only the headers are read,
	// and its size is their sum.
	appendLine(t, filepath.Join(b.cfg.SessionsDir, rel), msgLine("b2", "b1", strings.Repeat("x", 2*eventlog.MaxChunk)))

	t.Setenv("PISYNC_SESSIONS_DIR", b.cfg.SessionsDir)
	t.Setenv("PISYNC_STATE_DIR", b.cfg.StateDir)
	t.Setenv("PISYNC_NODE_ID", "ws-b")
	check := func(how string) {
		t.Helper()
		var got, text []string
		waitUntil(t, 30*time.Second, func() (bool, string) {
			var out bytes.Buffer
			if err := eventsCommand([]string{sid, "--json"}, &out); err != nil {
				return false, err.Error()
			}
			got, text = nil, nil
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var e eventJSON
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					return false, err.Error()
				}
				got = append(got, e.Stream+" "+e.Node+" "+e.Type+" "+e.EntryID)
				if len(e.Entry) != e.Bytes {
					t.Errorf("%s: event %d: bytes %d, entry of %d", how, e.Seq, e.Bytes, len(e.Entry))
				}
				parent, from := e.ParentID, ""
				if parent == "" {
					parent = "-"
				}
				if e.Stream == eventlog.AllStream {
					from = "\tfrom " + e.Node
				}
				text = append(text, fmt.Sprintf("%d\t%s\t%s\t%s\t%d bytes%s", e.Seq, e.Type, e.EntryID, parent, e.Bytes, from))
			}
			return len(got) == 5, fmt.Sprintf("%s: %q", how, got)
		})
		want := []string{"PI_LOCAL ws-b message b1", "PI_LOCAL ws-b message b2", "PI_ALL ws-a session " + sid, "PI_ALL ws-a message a00000", "PI_ALL ws-a message a00001"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: events %q, want %q", how, got, want)
		}
		var out bytes.Buffer
		if err := eventsCommand([]string{sid}, &out); err != nil {
			t.Fatalf("%s: events: %v", how, err)
		}
		if got := strings.TrimSpace(out.String()); got != strings.Join(text, "\n") {
			t.Errorf("%s: events:\n%s\nwant (as --json shows them):\n%s", how, got, strings.Join(text, "\n"))
		}
	}
	check("from the daemon")
	b.stop()
	check("from the store")
}

// TestEventJSONIsUTF8: a line whose JSON holds a byte that is not UTF-8
// (a damaged or hostile file) is printed as rawLine, not copied as it is:
// `events --json` stays JSON to a strict reader.
func TestEventJSONIsUTF8(t *testing.T) {
	for _, raw := range []string{`{"type":"message","id":"m1","text":"ok"}`, "{\"type\":\"message\",\"id\":\"m1\",\"text\":\"bad \xff\"}", "not json"} {
		b, err := json.Marshal(newEventJSON(&eventlog.Event{Raw: []byte(raw)}))
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(b) {
			t.Errorf("%q: not UTF-8: %q", raw, b)
		}
		var back map[string]any
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("%q: %v", raw, err)
		}
		if _, isEntry := back["entry"]; isEntry != (utf8.ValidString(raw) && json.Valid([]byte(raw))) {
			t.Errorf("%q: entry %v", raw, back)
		}
	}
}
