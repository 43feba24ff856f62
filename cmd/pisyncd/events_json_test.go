package main

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/projection"
)

// TestEventsJSONAsTail: events --json names an event's fields as tail
// --json does: a tombstone has its op and no entry id. (Before, events
// printed "entryId":"" and no op, so a deletion read as a line of type
// "tombstone" without an id.)
func TestEventsJSONAsTail(t *testing.T) {
	raw := []byte(`{"op":"delete","file":"--p--/s.jsonl","time":"2026-12-06T00:00:00Z"}`)
	ev := &eventlog.Event{Stream: eventlog.LocalStream, Subject: "pi.evt.n.s", Seq: 3, Node: "n", SID: "s",
		Type: "tombstone", Op: eventlog.OpDelete, File: "--p--/s.jsonl", Raw: raw, Sha: sha256.Sum256(raw)}
	b, err := json.Marshal(newEventJSON(ev))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.Contains(got, `"op":"delete"`) || strings.Contains(got, `"entryId"`) {
		t.Errorf("events --json of a tombstone: %s", got)
	}
	tail, err := json.Marshal(projection.TailEntry{Session: "s", Node: "n", Stream: eventlog.LocalStream, Seq: 3, Type: "tombstone", Op: eventlog.OpDelete, File: "--p--/s.jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	var e, tl map[string]any
	json.Unmarshal(b, &e)
	json.Unmarshal(tail, &tl)
	for k, v := range tl {
		if k != "entry" && e[k] != v {
			t.Errorf("%s: events --json %v, tail --json %v", k, e[k], v)
		}
	}
}
