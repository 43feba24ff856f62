package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// Reproduce: go test -run '^$' -bench . -benchtime 20x ./projection/

// BenchmarkContext10k: the full context of a 10k-entry session from the
// projection (tree in memory), against `pi-oracle context FILE` on the
// same file (node start-up included, as a user pays it) when node is
// installed. kept-bodies is a repeated query (bodies kept from the last
// one: the tree renders from memory); cold drops them first, so every
// body is read from the stream (a session's first query).
func BenchmarkContext10k(b *testing.B) {
	root := b.TempDir()
	sid := "0199dddd-0000-7000-8000-000000000001"
	data := linear(sid, 10000, 200)
	path := filepath.Join(root, "--bench--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
	writeFile(b, path, data)
	n := startNode(b, root, b.TempDir())
	want := fileContext(b, data)
	n.waitContext(sid, want)
	ctx := context.Background()
	var oracle time.Duration
	if _, err := exec.LookPath("node"); err == nil {
		bin := testenv.Oracle(b)
		const runs = 3
		start := time.Now()
		for i := 0; i < runs; i++ {
			out, err := exec.Command("node", bin, "context", path).Output()
			if err != nil || len(out) == 0 {
				b.Fatalf("pi-oracle: %v", err)
			}
		}
		oracle = time.Since(start) / runs
	}
	s := n.worker.lookup(sid, false)
	run := func(b *testing.B, cold bool) {
		var spent time.Duration
		for i := 0; i < b.N; i++ {
			if cold {
				s.mu.Lock()
				n.worker.dropBodies(s)
				s.mu.Unlock()
			}
			start := time.Now()
			if _, err := n.worker.Context(ctx, sid); err != nil {
				b.Fatal(err)
			}
			spent += time.Since(start)
		}
		if oracle > 0 {
			b.ReportMetric(float64(oracle.Milliseconds()), "oracle-ms")
			b.ReportMetric(float64(oracle)/float64(spent/time.Duration(b.N)), "x-faster")
		}
	}
	b.Run("kept-bodies", func(b *testing.B) { run(b, false) })
	b.Run("cold", func(b *testing.B) { run(b, true) })
}

// BenchmarkAppendEntry: one entry appended to a session of 1,000, 10,000
// or 100,000 entries, applied and its changed views written to KV (the
// index page of the tail, ctx, leaf, heads, catalog): how the cost of a
// live line grows with the session it joins.
func BenchmarkAppendEntry(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) { benchAppendEntry(b, n) })
	}
}

func benchAppendEntry(b *testing.B, entries int) {
	h := newByHand(b, "0199dddd-0000-7000-8000-000000000002", entries, 200)
	ctx := context.Background()
	parent := fmt.Sprintf("e%07d", entries-1)
	b.ReportAllocs()
	b.ResetTimer()
	// The CPU of the whole process: the views' stores in the embedded
	// server too. The time per op also waits on those stores' fsyncs.
	cpu0 := testenv.ProcessCPU(b)
	defer func() {
		b.ReportMetric(float64(testenv.ProcessCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	}()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("n%07d", i)
		h.apply(b, id, parent, entry(id, parent, "appended"))
		if err := h.w.writeViewsNow(ctx, h.s); err != nil {
			b.Fatal(err)
		}
		parent = id
	}
}

// BenchmarkCatalog10k: listing 10k sessions, from the worker's memory (what
// `pisyncd ls` asks the daemon) and cold from the bucket (a KV watch over
// every catalog key: the worker's start, or ls without a daemon).
func BenchmarkCatalog10k(b *testing.B) {
	n := startNode(b, "", b.TempDir())
	ctx := context.Background()
	for i := 0; i < 10000; i++ {
		sid := fmt.Sprintf("0199eeee-0000-7000-8000-%012d", i)
		c := CatalogEntry{SessionID: sid, Cwd: "/home/u/p", Nodes: []string{testNode}, Entries: i,
			UpdatedMs: 1_700_000_000_000 + float64(i), Src: Applied{{eventlog.LocalStream, uint64(i + 1)}}}
		v, _ := json.Marshal(c)
		if _, err := n.worker.kv.Put(ctx, sessionKey(sid, "cat"), v); err != nil {
			b.Fatal(err)
		}
	}
	n.stopWorker()
	n.startWorker()
	b.Run("memory", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c, err := n.worker.Catalog(ctx)
			if err != nil || len(c) != 10000 {
				b.Fatalf("%d entries, %v", len(c), err)
			}
		}
	})
	b.Run("memory-after-change", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			n.worker.mu.Lock()
			n.worker.catDirty = true
			n.worker.mu.Unlock()
			if c, err := n.worker.Catalog(ctx); err != nil || len(c) != 10000 {
				b.Fatal(err)
			}
		}
	})
	b.Run("cold-kv", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c, err := ReadCatalog(ctx, n.worker.kv)
			if err != nil || len(c) != 10000 {
				b.Fatalf("%d entries, %v", len(c), err)
			}
		}
	})
}
