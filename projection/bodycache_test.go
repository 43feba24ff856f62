package projection

import (
	"path/filepath"
	"testing"
)

// TestBodyCacheFollowsAppends: queries keep the window's bodies and the
// lines applied since join them; every answer still equals the file's
// context, through appends below the leaf, a branch and a compaction.
func TestBodyCacheFollowsAppends(t *testing.T) {
	root := t.TempDir()
	sid := "0199cccc-0000-7000-8000-000000000001"
	path := filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
	writeFile(t, path, linear(sid, 50, 10))
	n := startNode(t, root, t.TempDir())
	check := func() {
		t.Helper()
		n.waitFileContext(sid, path)
		s := n.worker.lookup(sid, false)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.bodies == nil {
			t.Fatal("no bodies kept after a query")
		}
		var sum int64
		for _, b := range s.bodies.bodies {
			sum += int64(len(b))
		}
		n.worker.mu.Lock()
		total := n.worker.bodyBytes
		n.worker.mu.Unlock()
		if sum != s.bodies.bytes || total != sum {
			t.Fatalf("accounting: bodies %d, recorded %d, worker total %d", sum, s.bodies.bytes, total)
		}
	}
	check()
	appendFile(t, path, entry("a1", "e0000049", "below the leaf")+"\n"+assistant("a2", "a1", 7)+"\n")
	check()
	appendFile(t, path, entry("b1", "e0000020", "a branch")+"\n")
	check()
	appendFile(t, path, `{"type":"compaction","id":"c1","parentId":"b1","timestamp":"2026-11-29T23:10:17.000Z","summary":"s","firstKeptEntryId":"e0000018","tokensBefore":5}`+"\n")
	check()
}

// TestBodyCacheBudget: the kept bodies of all sessions stay within
// MaxBodyBytes, the least recently queried going first.
func TestBodyCacheBudget(t *testing.T) {
	root := t.TempDir()
	sids := []string{"0199cccc-0000-7000-8000-000000000002", "0199cccc-0000-7000-8000-000000000003"}
	var wants []string
	for _, sid := range sids {
		data := linear(sid, 100, 100)
		writeFile(t, filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl"), data)
		wants = append(wants, fileContext(t, data))
	}
	n := startNode(t, root, t.TempDir())
	w := n.worker
	w.mu.Lock()
	w.opts.MaxBodyBytes = 30 << 10 // one session's window (~23 KB), not two
	w.mu.Unlock()
	for round := 0; round < 2; round++ {
		for i, sid := range sids {
			n.waitContext(sid, wants[i])
			w.mu.Lock()
			total := w.bodyBytes
			w.mu.Unlock()
			if total <= 0 || total > 30<<10 {
				t.Fatalf("after querying %s: %d bytes kept", sid, total)
			}
			// The other session may not be known yet in the first round:
			// the worker applies the files' events in its own time.
			kept := false
			if other := w.lookup(sids[1-i], false); other != nil {
				other.mu.Lock()
				kept = other.bodies != nil
				other.mu.Unlock()
			}
			if kept && round > 0 {
				t.Fatalf("the other session's bodies survived a query over budget")
			}
		}
	}
}
