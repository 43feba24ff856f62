package projection

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

func userLine(id, content string) string {
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":%s}}`, id, content)
}

// The catalog's first message and fork, from the lines as they come: the
// first user message with text in file order, as pi's session list
// derives it, cut at FirstMessageMax on a rune boundary; parentSession
// when the header has it as a string.
func TestCatalogFirstMessageAndFork(t *testing.T) {
	long := strings.Repeat("é", session.FirstMessageMax) // 2 bytes a rune: cut at an even length
	const hdr = `{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}`
	for _, c := range []struct {
		name          string
		lines         []string
		first, parent string
	}{
		{"none", []string{hdr}, "", ""},
		{"string", []string{hdr, userLine("a", `"hello"`)}, "hello", ""},
		{"blocks joined by a space", []string{hdr, userLine("a", `[{"type":"text","text":"one"},{"type":"image","data":"x"},{"type":"text","text":"two"}]`)}, "one two", ""},
		{"the first one wins", []string{hdr, userLine("a", `"first"`), userLine("b", `"second"`)}, "first", ""},
		{"assistant text is not it", []string{hdr,
			`{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}]}}`,
			userLine("b", `"question"`)}, "question", ""},
		{"no text: the next one", []string{hdr, userLine("a", `[{"type":"image","data":"x"}]`), userLine("b", `""`), userLine("c", `"third"`)}, "third", ""},
		{"content pi cannot read", []string{hdr, userLine("a", `5`), userLine("b", `"ok"`)}, "ok", ""},
		{"cut on a rune boundary", []string{hdr, userLine("a", `"x`+long+`"`)}, "x" + long[:session.FirstMessageMax-2], ""},
		{"lone surrogate", []string{hdr, userLine("a", `"a\ud800b"`)}, "a\uFFFDb", ""},
		{"not an entry's text", []string{hdr, `{"type":"custom_message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","content":"custom"}`}, "", ""},
		{"forked", []string{`{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/","parentSession":"/home/u/.pi/agent/sessions/--p--/old.jsonl"}`},
			"", "/home/u/.pi/agent/sessions/--p--/old.jsonl"},
		{"parentSession not a string", []string{`{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/","parentSession":7}`}, "", ""},
		{"parentSession, last duplicate", []string{`{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","parentSession":"/a","parentSession":"/b"}`}, "", "/b"},
		{"parentSession key case", []string{`{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","ParentSession":"/a"}`}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSessionState("s1")
			s.tree = session.NewTree()
			for k, line := range c.lines {
				s.appendLine(&eventlog.Event{Stream: "S", Seq: uint64(k + 1), Raw: []byte(line)})
				s.refreshCatalog(nil, &names{}, nil) // incrementally, after each line
			}
			if s.cat.FirstMessage != c.first {
				t.Errorf("first message %q, want %q", s.cat.FirstMessage, c.first)
			}
			if s.cat.ParentSession != c.parent || s.cat.Forked != (c.parent != "") {
				t.Errorf("parent %q forked %v, want %q", s.cat.ParentSession, s.cat.Forked, c.parent)
			}
		})
	}
}

// TestCatalogFirstMessageLive: through the tailer and the worker, the first
// message arrives after the header and is set then; a forked session says
// so; a projection rebuilt from the streams holds the same values, and so
// does a worker restarted on the bucket, which holds no first message (it
// is read back from the streams); an erase drops them with the session.
func TestCatalogFirstMessageLive(t *testing.T) {
	root := t.TempDir()
	const sid, fork = "0199cccc-0000-7000-8000-000000000001", "0199cccc-0000-7000-8000-000000000002"
	path := filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
	forkPath := filepath.Join(root, "--p--", "2026-11-29T23-09-16-463Z_"+fork+".jsonl")
	writeFile(t, path, []byte(header(sid)+"\n"))
	n := startNode(t, root, t.TempDir())
	cat := func(sid string, ok func(CatalogEntry) bool) CatalogEntry {
		t.Helper()
		var c CatalogEntry
		waitFor(t, 20*time.Second, func() (bool, string) {
			var found bool
			c, found = n.catalogEntry(sid)
			return found && ok(c), fmt.Sprintf("%+v", c)
		})
		return c
	}
	cat(sid, func(c CatalogEntry) bool {
		return c.Src.Get(eventlog.LocalStream) > 0 && c.FirstMessage == "" && !c.Forked
	})

	appendFile(t, path, assistant("a0", "", 10)+"\n")
	cat(sid, func(c CatalogEntry) bool { return c.Entries == 1 && c.FirstMessage == "" })
	appendFile(t, path, entry("u1", "a0", "what does <b>this</b> do?")+"\n"+entry("u2", "u1", "later")+"\n")
	cat(sid, func(c CatalogEntry) bool { return c.Entries == 3 && c.FirstMessage == "what does <b>this</b> do?" })

	hdr := strings.TrimSuffix(header(fork), "}") + fmt.Sprintf(`,"parentSession":%q}`, path)
	writeFile(t, forkPath, []byte(hdr+"\n"+entry("f1", "", "forked question")+"\n"))
	cat(fork, func(c CatalogEntry) bool {
		return c.Forked && c.ParentSession == path && c.FirstMessage == "forked question"
	})

	// No value of the bucket, in any revision still in its stream, holds
	// a first message.
	noText := func(when string) {
		t.Helper()
		for _, text := range []string{"what does", "forked question"} {
			if key := n.bucketHolds(text); key != "" {
				t.Errorf("%s: the bucket holds %q in %s", when, text, key)
			}
		}
	}
	noText("live")

	// Rebuilt from the streams: the bucket dropped, a new worker catches up.
	want := map[string]CatalogEntry{}
	got, err := n.worker.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		want[c.SessionID] = c
	}
	n.stopWorker()
	if err := n.worker.js.DeleteKeyValue(context.Background(), Bucket); err != nil {
		t.Fatal(err)
	}
	n.startWorker()
	for id, w := range want {
		c := cat(id, func(c CatalogEntry) bool { return c.Entries == w.Entries })
		if c.FirstMessage != w.FirstMessage || c.ParentSession != w.ParentSession || c.Forked != w.Forked {
			t.Errorf("%s rebuilt: first %q parent %q forked %v, want %q %q %v", id, c.FirstMessage, c.ParentSession, c.Forked,
				w.FirstMessage, w.ParentSession, w.Forked)
		}
	}

	// Restarted on the bucket: no tree is loaded (no line comes), so the
	// first messages come from the background read of the streams.
	n.stopWorker()
	n.startWorker()
	// FirstMessagesFilled closes once the reads are done (the daemon
	// gives its start's memory back after it).
	select {
	case <-n.worker.FirstMessagesFilled():
	case <-time.After(20 * time.Second):
		t.Fatal("restarted: first messages not filled within 20s")
	}
	if st := n.worker.Stats(); st.FirstMessagesRead != 2 || n.worker.FillingFirstMessages() {
		t.Errorf("restarted: filled, with %d first messages read back (want 2), filling %v", st.FirstMessagesRead, n.worker.FillingFirstMessages())
	}
	for id, w := range want {
		c := cat(id, func(c CatalogEntry) bool { return c.FirstMessage != "" })
		if c.FirstMessage != w.FirstMessage || c.ParentSession != w.ParentSession || c.Forked != w.Forked {
			t.Errorf("%s restarted: first %q parent %q forked %v, want %q %q %v", id, c.FirstMessage, c.ParentSession, c.Forked,
				w.FirstMessage, w.ParentSession, w.Forked)
		}
	}
	if st := n.worker.Stats(); st.FirstMessagesRead != 2 || st.Trees != 0 {
		t.Errorf("restarted: %d first messages read back, %d trees loaded; want 2, 0", st.FirstMessagesRead, st.Trees)
	}
	// The web list asks again while this says so: it must end.
	waitFor(t, 10*time.Second, func() (bool, string) {
		return !n.worker.FillingFirstMessages(), "still filling first messages after reading them all back"
	})
	noText("restarted")

	// Erased: the entry goes, and its values with it.
	if err := os.Remove(forkPath); err != nil {
		t.Fatal(err)
	}
	cat(fork, func(c CatalogEntry) bool { return c.Deleted })
	if _, err := eventlog.EraseSession(context.Background(), n.worker.js, "test-node", fork, eventlog.EraseBounds{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.log.PublishErase(context.Background(), fork, eventlog.EraseLine("--p--/"+filepath.Base(forkPath), time.Now())); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() (bool, string) {
		var c CatalogEntry
		if n.kvGet(sessionKey(fork, "cat"), &c) {
			return false, fmt.Sprintf("still in the bucket: %+v", c)
		}
		all, err := n.worker.Catalog(context.Background())
		for _, c := range all {
			if c.SessionID == fork {
				return false, fmt.Sprintf("still in the catalog: %+v", c)
			}
		}
		return err == nil, fmt.Sprint(err)
	})
	// The web view's read of it: unknown, as a session that never was
	// (before: an empty session).
	if snap, err := n.worker.Snapshot(context.Background(), fork, 0); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("snapshot of the erased session: %v, %v; want ErrUnknownSession", snap, err)
	}
}

// bucketHolds is the subject of a message of the bucket's stream (every
// revision it still holds, purged or superseded ones' bytes aside) whose
// value contains text, "" for none.
func (n *node) bucketHolds(text string) string {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := n.worker.js.Stream(ctx, "KV_"+Bucket)
	if err != nil {
		n.t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		n.t.Fatal("the bucket's stream is empty")
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			n.t.Fatal(err)
		}
		if bytes.Contains(m.Data, []byte(text)) {
			return m.Subject
		}
	}
	return ""
}

// TestFirstMessageReadBounded: the read after a restart joins a first
// message split into chunks, and gives up on a session whose first user
// message comes after firstMaxMsgs messages (its tree, when loaded, sets
// it), reading no further than the bound.
func TestFirstMessageReadBounded(t *testing.T) {
	root := t.TempDir()
	const big, late = "0199dddd-0000-7000-8000-000000000001", "0199dddd-0000-7000-8000-000000000002"
	long := strings.Repeat("a long pasted text ", 40<<10) // ~760 KiB: a line of several chunks
	writeFile(t, filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+big+".jsonl"), []byte(header(big)+"\n"+entry("u1", "", long)+"\n"))
	lines := []string{header(late)}
	parent := ""
	for i := 0; i < firstMaxMsgs+10; i++ {
		id := fmt.Sprintf("a%d", i)
		lines = append(lines, assistant(id, parent, 1))
		parent = id
	}
	lines = append(lines, entry("u1", parent, "the late question"))
	writeFile(t, filepath.Join(root, "--p--", "2026-11-29T23-09-16-463Z_"+late+".jsonl"), []byte(strings.Join(lines, "\n")+"\n"))
	n := startNode(t, root, t.TempDir())
	for sid, want := range map[string]string{big: long[:session.FirstMessageMax], late: "the late question"} {
		waitFor(t, 30*time.Second, func() (bool, string) {
			c, _ := n.catalogEntry(sid)
			return c.FirstMessage == want, fmt.Sprintf("live: %.40q", c.FirstMessage)
		})
	}
	src := func(sid string) Src {
		n.worker.mu.Lock()
		s := n.worker.sessions[sid]
		n.worker.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.src()
	}
	ctx := context.Background()
	tr, err := n.worker.readFirstMessage(ctx, big, src(big))
	if err != nil || tr.FirstMessage() != long[:session.FirstMessageMax] {
		t.Errorf("a first message of several chunks read back: %v %.40q", err, tr.FirstMessage())
	}
	tr, err = n.worker.readFirstMessage(ctx, late, src(late))
	if err != nil || tr.FirstMessage() != "" || tr.Len() >= firstMaxMsgs+1 {
		t.Errorf("past the bound: %v, %q after %d entries, want none within %d", err, tr.FirstMessage(), tr.Len(), firstMaxMsgs)
	}
}

// TestFirstMessageReadBackMarksParent: the read-back after a start also
// sets a catalog written without parentSession; a session with no user
// message to read back changes only that, and the catalog served already
// must show it too (it was kept: only a first message marked it changed).
func TestFirstMessageReadBackMarksParent(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	sid := "0199aaaa-0000-7000-8000-0000000000fe"
	hdr := strings.TrimSuffix(header(sid), "}") + `,"parentSession":"/home/u/.pi/agent/sessions/p/a.jsonl"}`
	writeFile(t, filepath.Join(root, "--work--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl"),
		[]byte(hdr+"\n"+assistant("a1", "", 5)+"\n"))
	waitFor(t, 20*time.Second, func() (bool, string) {
		c, ok := n.catalogEntry(sid)
		return ok && c.Forked, fmt.Sprintf("catalog entry %+v", c)
	})
	// Stopped before its position is saved, the worker would apply the
	// two lines again after the restart, and a session with its tree
	// loaded is not read back.
	waitFor(t, 20*time.Second, func() (bool, string) {
		pos, err := n.worker.loadPos(context.Background(), eventlog.LocalStream)
		return err == nil && pos >= 2, fmt.Sprintf("position saved: %d (%v)", pos, err)
	})
	n.stopWorker()
	n.startWorker()
	waitFor(t, 20*time.Second, func() (bool, string) { return !n.worker.FillingFirstMessages(), "first messages still being read back" })

	// As a catalog written by a version without parentSession, served
	// (and kept) before the read-back reaches the session.
	n.worker.mu.Lock()
	s := n.worker.sessions[sid]
	n.worker.mu.Unlock()
	s.mu.Lock()
	s.parentRead, s.cat.ParentSession, s.cat.Forked = false, "", false
	s.mu.Unlock()
	n.worker.mu.Lock()
	n.worker.catDirty = true
	n.worker.mu.Unlock()
	if c, ok := n.catalogEntry(sid); !ok || c.Forked {
		t.Fatalf("catalog before the read-back: %+v, %v", c, ok)
	}
	if err := n.worker.fillFirstMessage(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if c, ok := n.catalogEntry(sid); !ok || !c.Forked || c.ParentSession == "" || c.FirstMessage != "" {
		t.Fatalf("catalog after the read-back: %+v, %v", c, ok)
	}
}
