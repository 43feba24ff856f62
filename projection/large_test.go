package projection

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestHugeSessionValuesStaySmall: a 20k-entry session's views are paged;
// every value in the bucket stays under maxValue (NATS allows 1 MiB).
func TestHugeSessionValuesStaySmall(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	root := t.TempDir()
	sid := "0199cccc-0000-7000-8000-000000000001"
	data := linear(sid, 20000, 20)
	writeFile(t, filepath.Join(root, "--big--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl"), data)
	n := startNode(t, root, t.TempDir())
	waitFor(t, 120*time.Second, func() (bool, string) {
		var cv ContextView
		n.kvGet(sessionKey(sid, "ctx"), &cv)
		return cv.Entries == 20000, "context index not complete"
	})
	n.waitContext(sid, fileContext(t, data))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, err := n.worker.kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	count, biggest := 0, 0
	for k := range keys.Keys() {
		e, err := n.worker.kv.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		count++
		biggest = max(biggest, len(e.Value()))
		if len(e.Value()) > maxValue {
			t.Errorf("%s: %d bytes", k, len(e.Value()))
		}
	}
	var cv ContextView
	n.kvGet(sessionKey(sid, "ctx"), &cv)
	// 10 pages, cat, leaf, heads, ctx, pos.PI_LOCAL and rules.
	if cv.Pages != 10 || count != 10+6 {
		t.Errorf("pages %d, keys %d", cv.Pages, count)
	}
	t.Logf("%d keys, largest value %d bytes", count, biggest)
}
