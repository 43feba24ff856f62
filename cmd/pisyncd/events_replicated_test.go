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

	t.Setenv("PISYNC_SESSIONS_DIR", b.cfg.SessionsDir)
	t.Setenv("PISYNC_STATE_DIR", b.cfg.StateDir)
	t.Setenv("PISYNC_NODE_ID", "ws-b")
	check := func(how string) {
		t.Helper()
		var got []string
		waitUntil(t, 30*time.Second, func() (bool, string) {
			var out bytes.Buffer
			if err := eventsCommand([]string{sid, "--json"}, &out); err != nil {
				return false, err.Error()
			}
			got = nil
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var e eventJSON
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					return false, err.Error()
				}
				got = append(got, e.Stream+" "+e.Node+" "+e.Type+" "+e.EntryID)
			}
			return len(got) == 4, fmt.Sprintf("%s: %q", how, got)
		})
		want := []string{"PI_LOCAL ws-b message b1", "PI_ALL ws-a session " + sid, "PI_ALL ws-a message a00000", "PI_ALL ws-a message a00001"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: events %q, want %q", how, got, want)
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
