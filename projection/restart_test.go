package projection

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestRestartIncrementalTombstone: views are exact after a catch-up, a
// restart of the worker and of the whole node applies nothing when nothing
// changed, appends update leaf and context, and a deleted file marks the
// catalog entry deleted.
func TestRestartIncrementalTombstone(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	paths := map[string]string{}
	for i := 0; i < 3; i++ {
		sid := fmt.Sprintf("0199bbbb-0000-7000-8000-%012d", i)
		paths[sid] = filepath.Join(root, fmt.Sprintf("--p%d--", i), "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
		writeFile(t, paths[sid], linear(sid, 50+i, 10))
	}
	sidA := "0199bbbb-0000-7000-8000-000000000000"
	appendFile(t, paths[sidA], assistant("a1", "e0000049", 1234)+"\n")

	n := startNode(t, root, state)
	contexts := func() {
		t.Helper()
		for sid, p := range paths {
			n.waitFileContext(sid, p)
		}
	}
	check := func() {
		t.Helper()
		contexts()
		waitFor(t, 10*time.Second, func() (bool, string) {
			var cat CatalogEntry
			if !n.kvGet(sessionKey(sidA, "cat"), &cat) {
				return false, "no catalog entry"
			}
			ok := cat.Entries == 51 && cat.Tokens == 1234 && cat.Cost == 0.5 && string(cat.LeafID) == `"a1"` &&
				string(cat.Model) == `{"provider":"anthropic","modelId":"claude"}` && cat.Cwd == "/home/u/p" && cat.Src.Get("PI_LOCAL") > 0
			return ok, fmt.Sprintf("%+v", cat)
		})
	}
	check()
	var leaf LeafView
	if !n.kvGet(sessionKey(sidA, "leaf"), &leaf) || string(leaf.LeafID) != `"a1"` || leaf.Type != "message" {
		t.Fatalf("leaf %+v", leaf)
	}
	var heads HeadsView
	if !n.kvGet(sessionKey(sidA, "heads"), &heads) || len(heads.Heads) != 1 || string(heads.Heads[0].ID) != `"a1"` {
		t.Fatalf("heads %+v", heads)
	}
	var cv ContextView
	if !n.kvGet(sessionKey(sidA, "ctx"), &cv) || cv.Entries != 51 || cv.Refs != 51 || cv.Pages != 1 {
		t.Fatalf("ctx %+v", cv)
	}
	cat, _ := n.worker.Catalog(context.Background())
	if len(cat) != 3 {
		t.Fatalf("catalog %+v", cat)
	}

	// Restart the worker alone: nothing to apply.
	n.stopWorker()
	n.startWorker()
	check()
	if st := n.worker.Stats(); st.Applied != 0 {
		t.Fatalf("worker restart applied %d events", st.Applied)
	}

	// Restart everything (server, tailer, worker).
	n.stop()
	n = startNode(t, root, state)
	check()
	if st := n.worker.Stats(); st.Applied != 0 || st.Writes != 0 {
		t.Fatalf("node restart: %+v", st)
	}

	// Incremental: a branch from e0000010 becomes the leaf.
	appendFile(t, paths[sidA], entry("b1", "e0000010", "branch")+"\n")
	contexts()
	waitFor(t, 10*time.Second, func() (bool, string) {
		n.kvGet(sessionKey(sidA, "heads"), &heads)
		n.kvGet(sessionKey(sidA, "ctx"), &cv)
		return heads.Total == 2 && cv.Entries == 12 && string(cv.LeafID) == `"b1"`, fmt.Sprintf("heads %+v ctx %+v", heads, cv)
	})
	// The contexts asked above rebuilt the three trees from the stream
	// (lazily, after the restart); the append itself is one event.
	st := n.worker.Stats()
	if st.Applied != 1 || st.Rebuilds != 3 {
		t.Fatalf("after one append: %+v", st)
	}

	// Tombstone, then the file restored: the catalog follows both.
	data, err := os.ReadFile(paths[sidA])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(paths[sidA]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() (bool, string) {
		var c CatalogEntry
		n.kvGet(sessionKey(sidA, "cat"), &c)
		return c.Deleted, fmt.Sprintf("%+v", c)
	})
	writeFile(t, paths[sidA], data)
	waitFor(t, 20*time.Second, func() (bool, string) {
		var c CatalogEntry
		n.kvGet(sessionKey(sidA, "cat"), &c)
		return !c.Deleted && len(c.DeletedOn) == 0, fmt.Sprintf("%+v", c)
	})
}

// TestRestartHandledAtOnce: a worker started again over a stream it has
// handled says so at once. The daemon starts the search index, and gives
// the first read's memory back, once the projection has handled what the
// stream holds; after a restart with nothing new that must not wait for
// the next line to be written.
func TestRestartHandledAtOnce(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	sid := "0199bbbb-0000-7000-8000-000000000009"
	writeFile(t, filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl"), linear(sid, 20, 10))
	n := startNode(t, root, state)
	ctx := context.Background()
	var last uint64
	waitFor(t, 20*time.Second, func() (bool, string) {
		info, err := n.log.Info(ctx)
		last = info.LastSeq
		return err == nil && last == 21, fmt.Sprintf("PI_LOCAL ends at %d (%v), want 21", last, err)
	})
	// The position saved: the restart reads nothing again.
	waitFor(t, 20*time.Second, func() (bool, string) {
		var pos uint64
		n.kvGet(posKey(eventlog.LocalStream), &pos)
		return pos == last, fmt.Sprintf("position %d", pos)
	})
	n.stopWorker()
	n.startWorker()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := n.worker.WaitHandled(wctx, eventlog.LocalStream, last); err != nil {
		t.Fatalf("after a restart with nothing new: %v", err)
	}
	if st := n.worker.Stats(); st.Applied != 0 {
		t.Fatalf("the restart applied %d events", st.Applied)
	}
}
