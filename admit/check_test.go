package admit

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// line builds the event an honest forwarder would send for raw.
func line(raw string) *eventlog.Event {
	l := session.ParseLine([]byte(raw))
	ev := &eventlog.Event{Node: "ann", SID: "s1", Type: l.Type, Raw: []byte(raw), Sha: sha256.Sum256([]byte(raw)),
		File: "--home-ann-p--/2026-11-30T00-00-00-000Z_s1.jsonl"}
	if l.HasID {
		ev.ID = l.ID
	}
	if l.HasParent {
		ev.ParentID = l.ParentID
	}
	return ev
}

func TestCheck(t *testing.T) {
	hdr := `{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T00:00:00.000Z","cwd":"/home/ann/p"}`
	entry := `{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi"}}`
	child := `{"type":"message","id":"a2","parentId":"a1","message":{"role":"user","content":"x"}}`
	for _, ok := range []*eventlog.Event{
		line(hdr), line(entry), line(child), line(entry + "\r"),
		line(`{"type":"message","message":{}}`), // a v1 entry has no id
		{Node: "ann", SID: "s1", Op: eventlog.OpDelete, Type: "tombstone", File: "--p--/x.jsonl", Raw: []byte(`{"op":"delete","file":"--p--/x.jsonl"}`)},
	} {
		if r := Check(ok, 1<<20); r != nil {
			t.Errorf("Check(%s) = %v, want admitted", ok.Raw, r)
		}
	}
	mod := func(raw string, f func(*eventlog.Event)) *eventlog.Event { ev := line(raw); f(ev); return ev }
	for want, evs := range map[Reason][]*eventlog.Event{
		NotObject: {line(`[1,2]`), line(`"x"`), line(`null`), line(`{"a":`), line(``), line(`12`)},
		LineBreak: {line("{\"type\":\"message\",\"id\":\"a1\",\n\"x\":1}"), line("{\"type\":\"message\",\r\"id\":\"a1\"}"),
			line(entry + "\n" + child)},
		HeaderMismatch: {
			mod(entry, func(e *eventlog.Event) { e.ID = "a9" }),
			mod(entry, func(e *eventlog.Event) { e.Type = "session" }),
			mod(child, func(e *eventlog.Event) { e.ParentID = "zz" }),
			mod(child, func(e *eventlog.Event) { e.ParentID = "" }),
			mod(hdr, func(e *eventlog.Event) { e.SID = "other" }),
		},
		BadFileName: {
			mod(entry, func(e *eventlog.Event) { e.File = strings.Repeat("a", 256) + ".jsonl" }),
			mod(entry, func(e *eventlog.Event) { e.File = "../x.jsonl" }),
			mod(entry, func(e *eventlog.Event) { e.File = "--p--/.hidden.jsonl" }),
			mod(entry, func(e *eventlog.Event) { e.File = "--p--/x\n.jsonl" }),
			mod(entry, func(e *eventlog.Event) { e.File = "/abs/x.jsonl" }),
			mod(entry, func(e *eventlog.Event) { e.File = "--p--/x.txt" }),
		},
		BadCwd:  {line(strings.Replace(hdr, "/home/ann/p", `/home/ann/p\n[hub]`, 1)), line(strings.Replace(hdr, "/home/ann/p", `/x\u0000y`, 1))},
		TooLong: {line(`{"type":"message","id":"a1","pad":"` + strings.Repeat("p", 2000) + `"}`)},
		BadSubject: {
			mod(entry, func(e *eventlog.Event) { e.SID = strings.Repeat("s", eventlog.MaxSIDToken+1) }),
			mod(hdr, func(e *eventlog.Event) { e.SID = strings.Repeat("s.", 200) }),
		},
		UnknownOp: {
			mod(entry, func(e *eventlog.Event) { e.Op = "purge-everything" }),
			{Node: "ann", SID: "s1", Op: eventlog.OpDelete, File: "", Raw: []byte(`{}`)},
			{Node: "ann", SID: "s1", Op: eventlog.OpRestore, File: "--p--/x.jsonl", Raw: []byte(`[1]`)},
		},
	} {
		for _, ev := range evs {
			r := Check(ev, 1024)
			if r == nil || r.Reason != want {
				t.Errorf("Check(%.60q, file %.40q) = %v, want %s", ev.Raw, ev.File, r, want)
			}
			if r != nil && !errors.Is(r, eventlog.ErrRejected) {
				t.Errorf("a rejection does not match eventlog.ErrRejected")
			}
		}
	}
}
