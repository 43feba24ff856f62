package projection

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

func sameMemory(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestNamesKeepOneCopy(t *testing.T) {
	var nm names
	msg := "pi.all.node-1.s1"             // a message's subject
	a := nm.get(msg[7:13])                // "node-1", a substring of it
	b := nm.get(string([]byte("node-1"))) // the same text, elsewhere
	if a != "node-1" || b != "node-1" {
		t.Fatalf("got %q, %q", a, b)
	}
	if sameMemory(a, msg[7:13]) {
		t.Error("the kept copy shares the message's memory")
	}
	if !sameMemory(a, b) {
		t.Error("two gets of one text returned two copies")
	}
	if nm.get("") != "" {
		t.Error(`get("") is not ""`)
	}
	long := strings.Repeat("x", maxNameLen+1)
	if l1, l2 := nm.get(long), nm.get(long); l1 != long || sameMemory(l1, l2) {
		t.Errorf("a string of %d bytes was kept (%v)", len(long), sameMemory(l1, l2))
	}
	// Past the bound, a string is copied and not kept.
	for i := len(nm.m); i < maxNames; i++ {
		nm.get(fmt.Sprint("folder-", i))
	}
	c, d := nm.get("one more"), nm.get("one more")
	if c != "one more" || sameMemory(c, d) || len(nm.m) != maxNames {
		t.Errorf("past the bound: %q kept (%v), table of %d", c, sameMemory(c, d), len(nm.m))
	}
	if !sameMemory(nm.get("node-1"), a) {
		t.Error("a kept string was dropped")
	}
}

func TestNamesShareAnEntryRead(t *testing.T) {
	var nm names
	read := func() CatalogEntry { // what a bucket read gives: fresh strings
		return CatalogEntry{
			Cwd: string([]byte("/home/u/p")), Rules: string([]byte("seed")),
			Nodes: []string{string([]byte("n1")), string([]byte("n2"))}, DeletedOn: []string{string([]byte("n2"))},
			File:  string([]byte("--p--/a.jsonl")),
			Files: NodeFiles{{string([]byte("n1")), string([]byte("--p--/x.jsonl"))}, {string([]byte("n2")), string([]byte("--p--/a.jsonl"))}},
			Src:   Applied{{string([]byte("PI_ALL")), 3}, {string([]byte("PI_LOCAL")), 5}},
		}
	}
	a, b := read(), read()
	nm.share(&a)
	nm.share(&b)
	for _, p := range [][2]string{
		{a.Cwd, b.Cwd}, {a.Rules, b.Rules}, {a.Nodes[0], b.Nodes[0]}, {a.Nodes[1], b.DeletedOn[0]},
		{a.Files[0].Node, b.Nodes[0]}, {a.Src[0].Stream, b.Src[0].Stream}, {a.Src[1].Stream, b.Src[1].Stream},
	} {
		if !sameMemory(p[0], p[1]) {
			t.Errorf("%q: two copies", p[0])
		}
	}
	if !sameMemory(a.File, a.Files[1].File) || a.File != "--p--/a.jsonl" {
		t.Errorf("File %q is not its node's file", a.File)
	}
	if a.Files[0].File != "--p--/x.jsonl" {
		t.Errorf("the other node's file changed: %q", a.Files[0].File)
	}
}

// Sessions fed by events keep one copy of their node and stream, and none
// of the events' memory.
func TestApplySharesNodeAndStream(t *testing.T) {
	var nm names
	var states []*sessionState
	for i, sid := range []string{"s1", "s2"} {
		subject := string([]byte("pi.all.n1.PI_ALL")) // fresh memory per event
		ev := &eventlog.Event{Stream: subject[10:], Seq: uint64(i + 1), Node: subject[7:9], SID: sid, File: "--p--/" + sid + ".jsonl",
			Type: "session", Raw: []byte(`{"type":"session","version":3,"id":"` + sid + `","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}`)}
		s := newSessionState(sid)
		s.tree = session.NewTree()
		s.apply(ev, &nm, false)
		s.refreshCatalog(nil, &nm, nil)
		if sameMemory(s.cat.Nodes[0], ev.Node) || sameMemory(s.cat.Src[0].Stream, ev.Stream) || sameMemory(s.cat.Files[0].Node, ev.Node) {
			t.Fatalf("%s keeps its event's memory", sid)
		}
		states = append(states, s)
	}
	a, b := states[0].cat, states[1].cat
	if a.Nodes[0] != "n1" || a.Src[0].Stream != "PI_ALL" || a.Cwd != "/p" {
		t.Fatalf("entry %+v", a)
	}
	if !sameMemory(a.Nodes[0], b.Nodes[0]) || !sameMemory(a.Files[0].Node, b.Nodes[0]) || !sameMemory(a.Src[0].Stream, b.Src[0].Stream) || !sameMemory(a.Cwd, b.Cwd) {
		t.Error("two sessions hold two copies of a shared string")
	}
}
