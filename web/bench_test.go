package web

import (
	"context"
	"io"
	"testing"
	"time"
)

// BenchmarkSessionRender10k: the session page's data for a 10k-entry
// session (snapshot, tree, branch HTML), against the baseline of the
// same session's context as `pisyncd context` computes it.
func BenchmarkSessionRender10k(b *testing.B) {
	d := startDaemon(b)
	const sid = "44444444-0000-4000-8000-000000000004"
	d.write(sid, bigSession(sid, 10000)...)
	d.waitEntries(sid, 10000)
	ctx := context.Background()
	var snap, tree, branch, base time.Duration
	for b.Loop() {
		t0 := time.Now()
		s, err := d.worker.Snapshot(ctx, sid, 0)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		st := newSessionText(s)
		st.tree()
		t2 := time.Now()
		path := st.path(idText(s.Tree.Leaf()))
		start, end := window(st, path, "", -1, -1)
		d.web.branchHTML(st, path, start, end)
		t3 := time.Now()
		if err := d.worker.WriteContext(ctx, io.Discard, sid, "", d.web.opts.Rules); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		snap, tree, branch, base = snap+t1.Sub(t0), tree+t2.Sub(t1), branch+t3.Sub(t2), base+t4.Sub(t3)
	}
	n := float64(b.N)
	b.ReportMetric(float64(snap.Milliseconds())/n, "snapshot-ms")
	b.ReportMetric(float64(tree.Milliseconds())/n, "tree-ms")
	b.ReportMetric(float64(branch.Milliseconds())/n, "branch-ms")
	b.ReportMetric(float64(base.Milliseconds())/n, "context-ms")
	b.ReportMetric(float64(snap+tree+branch)/float64(base), "x-context")
}
