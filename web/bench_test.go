package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/projection"
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
	var snapD, treeD, branchD, baseD time.Duration
	for b.Loop() {
		t0 := time.Now()
		s, err := d.worker.Snapshot(ctx, sid, 0)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ls := lines(s)
		tree(s, ls)
		usage(ls)
		t2 := time.Now()
		st := newSessionText(s)
		path := st.path(idText(s.Tree.Leaf()))
		start, end := window(st, path, "", -1, -1)
		d.web.branchHTML(st, path, start, end)
		t3 := time.Now()
		if err := d.worker.WriteContext(ctx, io.Discard, sid, "", d.web.opts.Rules); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		snapD, treeD, branchD, baseD = snapD+t1.Sub(t0), treeD+t2.Sub(t1), branchD+t3.Sub(t2), baseD+t4.Sub(t3)
	}
	n := float64(b.N)
	b.ReportMetric(float64(snapD.Milliseconds())/n, "snapshot-ms")
	b.ReportMetric(float64(treeD.Milliseconds())/n, "tree-ms")
	b.ReportMetric(float64(branchD.Milliseconds())/n, "branch-ms")
	b.ReportMetric(float64(baseD.Milliseconds())/n, "context-ms")
	b.ReportMetric(float64(snapD+treeD+branchD)/float64(baseD), "x-context")
}

// BenchmarkSessionsList10k: the list's answer for 10k sessions (each with
// a first message of 130 bytes), against the baseline of the control
// socket's /ls on the same catalog; then, with chromium, the list page's
// first rows drawn, against the whole list drawn in the same navigation.
func BenchmarkSessionsList10k(b *testing.B) {
	d := startDaemon(b)
	const n = 10000
	for i := 0; i < n; i++ {
		sid := fmt.Sprintf("66666666-0000-4000-8000-%012d", i)
		cwd := fmt.Sprintf("/home/u/p%d", i%50)
		p := filepath.Join(d.root, fmt.Sprintf("--home-u-p%d--", i%50), "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
		testenv.WriteFile(b, p, []byte(testenv.HeaderAt(sid, cwd, "2026-11-29T23:08:16.463Z")+"\n"+testenv.Entry("u1", "", fmt.Sprintf("session %d: why does the parser drop the last line of a file that ends without a newline, and where do we handle that?", i))+"\n"))
	}
	testenv.WaitFor(b, 10*time.Minute, func() (bool, string) {
		cat, err := d.worker.Catalog(context.Background())
		return err == nil && len(cat) == n, fmt.Sprintf("%d sessions in the catalog", len(cat))
	})
	ls := d.worker.Handler()
	get := func(h http.Handler, path string) time.Duration {
		req := httptest.NewRequest("GET", path, nil)
		req.Host = "127.0.0.1"
		req.Header.Set(TokenHeader, testToken)
		rec := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(rec, req)
		el := time.Since(t0)
		if rec.Code != 200 {
			b.Fatalf("%s: %d", path, rec.Code)
		}
		return el
	}
	var web, base time.Duration
	for b.Loop() {
		web += get(d.web, "/api/sessions")
		base += get(ls, "/ls")
	}
	b.ReportMetric(float64(web.Microseconds())/float64(b.N)/1000, "list-ms")
	b.ReportMetric(float64(base.Microseconds())/float64(b.N)/1000, "ls-ms")
	b.ReportMetric(float64(web)/float64(base), "x-ls")
	b.ReportMetric(firstMessagesBack(b, d, n), "fill-ms")
	if _, err := exec.LookPath("chromium"); err != nil {
		return
	}
	br := newBrowser(b)
	// The first navigation also starts the renderer: reported apart. Then
	// warm navigations, each timed by the page from its navigation start:
	// the first rows drawn (the newest sessions, in the page), and the whole
	// list drawn, which is what the first paint waited for before: the
	// same run's baseline.
	type timing struct {
		Doc, Script, Run, Full, Parsed, Drawn, Complete float64
		Heads                                           int
	}
	measure := func() timing {
		br.do(b, chromedp.Navigate(viewLink(d.http.URL+"/")))
		br.waitJS(b, 60*time.Second, `document.body.dataset.ready === '1'`)
		return eval[timing](b, br, `(() => {
			const res = p => performance.getEntriesByType('resource').filter(e => e.name.endsWith(p));
			const m = n => (performance.getEntriesByName(n)[0] || {}).startTime || 0;
			const head = res('/api/sessions?limit=100');
			return {Doc: performance.getEntriesByType('navigation')[0].responseEnd, Script: (res('list.js')[0] || {}).responseEnd || 0,
				Run: m('pisync-list-script'), Full: (res('/api/sessions')[0] || {}).responseEnd || 0,
				Parsed: m('pisync-list-parsed'), Drawn: m('pisync-list-drawn'), Complete: m('pisync-list-complete'), Heads: head.length};
		})()`)
	}
	b.ReportMetric(measure().Drawn, "firstpaint-cold-ms")
	var drawn, complete []float64
	for range 7 {
		tm := measure()
		b.Logf("warm: page %.1f, list.js loaded %.1f, run %.1f, first rows drawn %.1f (%d answers of the newest asked for); whole list answered %.1f, parsed %.1f, drawn %.1f ms",
			tm.Doc, tm.Script, tm.Run, tm.Drawn, tm.Heads, tm.Full, tm.Parsed, tm.Complete)
		drawn, complete = append(drawn, tm.Drawn), append(complete, tm.Complete)
	}
	sort.Float64s(drawn)
	sort.Float64s(complete)
	b.ReportMetric(drawn[len(drawn)/2], "firstpaint-ms")
	b.ReportMetric(complete[len(complete)/2], "complete-ms")
	b.ReportMetric(drawn[len(drawn)/2]/complete[len(complete)/2], "x-complete")
	if got := eval[int](b, br, `document.querySelectorAll('#list .row').length`); got > 100 {
		b.Errorf("%d rows in the DOM: the list is not virtualised", got)
	}
	br.screenshot(b, "sessions-10k")
}

// BenchmarkAppendToPage: pi's append (a line written to the session
// file) until the entry is in the open page, p50 and p99 over 100
// appends, each waited for before the next.
func BenchmarkAppendToPage(b *testing.B) {
	chromiumPath(b)
	br := newBrowser(b)
	d := startDaemon(b)
	path := d.write(sid1, testenv.Header(sid1), testenv.Entry("u0", "", "start"))
	d.waitEntries(sid1, 1)
	br.openLive(b, d.http.URL+"/s/"+sid1)
	// The page's clock and ours are the same machine's: record when each
	// entry lands in the DOM.
	eval[bool](b, br, `(() => { window.__seen = {}; new MutationObserver(ms => ms.forEach(m => m.addedNodes.forEach(n => { if (n.dataset && n.dataset.id) window.__seen[n.dataset.id] = Date.now(); }))).observe(document.getElementById('entries'), {childList: true}); return true })()`)
	var lat []float64
	parent := "u0"
	i := 0
	for b.Loop() {
		for k := 0; k < 100; k++ {
			i++
			id := fmt.Sprintf("n%d", i)
			t0 := time.Now().UnixMilli()
			testenv.AppendFile(b, path, testenv.Entry(id, parent, "live "+id)+"\n")
			parent = id
			br.waitJS(b, 20*time.Second, fmt.Sprintf(`window.__seen['%s']`, id))
			lat = append(lat, eval[float64](b, br, fmt.Sprintf(`window.__seen['%s']`, id))-float64(t0))
		}
	}
	sort.Float64s(lat)
	b.ReportMetric(lat[len(lat)/2], "p50-ms")
	b.ReportMetric(lat[len(lat)*99/100], "p99-ms")
}

// firstMessagesBack is how long a worker started on the bucket d's worker
// wrote takes to read every session's first message back from the streams
// (the bucket holds none), in ms: what a restart costs before the list
// shows them all. The second worker never follows the streams (StartAfter
// is never closed), so it writes nothing beside d's.
func firstMessagesBack(b *testing.B, d *daemon, n int) float64 {
	b.Helper()
	w, err := projection.New(d.nc, projection.Options{Node: testNode, StartAfter: make(chan struct{})})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- w.Run(ctx) }()
	testenv.WaitFor(b, 10*time.Minute, func() (bool, string) {
		st := w.Stats()
		return st.FirstMessagesRead == int64(n), fmt.Sprintf("%d of %d first messages read back", st.FirstMessagesRead, n)
	})
	el := time.Since(t0)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return float64(el.Microseconds()) / 1000
}
