package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/projection"
)

// countingSource is the real worker, counting the sessions it reads.
type countingSource struct {
	Source
	reads atomic.Int64
}

func (c *countingSource) Snapshot(ctx context.Context, sid string, maxBytes int64) (*projection.Snapshot, error) {
	c.reads.Add(1)
	return c.Source.Snapshot(ctx, sid, maxBytes)
}

// countedView serves a view over d's worker that counts its reads; the
// server is closed with the test.
func countedView(t *testing.T, d *daemon) (*countingSource, *httptest.Server) {
	t.Helper()
	src := &countingSource{Source: d.worker}
	_, srv := serveView(t, Options{Source: src})
	return src, srv
}

// serveView serves a view of opts, with the tests' token and node, on a
// server closed with the test.
func serveView(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	opts.Token, opts.Node = testToken, testNode
	view, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(view)
	t.Cleanup(srv.Close)
	return view, srv
}

// fetch gets url with the tests' client: its status and body.
func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := viewClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestKeptSnapshotWhileCurrent: a reload and a branch switch of a session
// that has not moved reuse the snapshot the page was rendered from; once
// the catalog has applied a new entry, the next page reads the session
// again and shows it.
func TestKeptSnapshotWhileCurrent(t *testing.T) {
	d := startDaemon(t)
	path := d.write(sid1,
		testenv.Header(sid1),
		testenv.Entry("u1", "", "hello"),
		assistant("a1", "u1", "let me edit", "c1"),
		toolResult("r1", "a1", "c1", "edited"),
	)
	d.waitEntries(sid1, 3)
	src, srv := countedView(t, d)
	get := func(path string, v any) {
		t.Helper()
		resp, err := viewClient.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	page := func() (v sessionView, tv treeView) {
		get("/api/s/"+sid1, &v)
		get("/api/s/"+sid1+"/tree", &tv)
		return v, tv
	}

	first, _ := page()
	again, againTree := page()
	get("/api/s/"+sid1+"/branch?leaf=a1", new(struct{}))
	if n := src.reads.Load(); n != 1 {
		t.Errorf("%d reads of the session for a page and its tree, a reload and a branch switch; want 1", n)
	}
	if len(againTree.Tree) != 3 || again.Pos != first.Pos || againTree.Pos != first.Pos || againTree.Usage[0].Count != 1 {
		t.Errorf("the reload differs: %d rows, pos %q/%q/%q", len(againTree.Tree), again.Pos, againTree.Pos, first.Pos)
	}

	testenv.AppendFile(t, path, testenv.Entry("u2", "r1", "more")+"\n")
	d.waitEntries(sid1, 4)
	after, afterTree := page()
	if n := src.reads.Load(); n != 2 {
		t.Errorf("%d reads after the session moved, want 2", n)
	}
	if len(afterTree.Tree) != 4 || after.Leaf != "u2" || afterTree.Leaf != "u2" || after.Pos == first.Pos {
		t.Errorf("after an append: %d rows, leaf %q, pos %q (was %q)", len(afterTree.Tree), after.Leaf, after.Pos, first.Pos)
	}
}

// gatedSource is the real worker whose snapshots wait for release.
type gatedSource struct {
	Source
	reads   atomic.Int64
	release chan struct{}
}

func (g *gatedSource) Snapshot(ctx context.Context, sid string, maxBytes int64) (*projection.Snapshot, error) {
	g.reads.Add(1)
	<-g.release
	return g.Source.Snapshot(ctx, sid, maxBytes)
}

// gatedView serves a view with o over d's worker whose reads wait until
// release is called (by the test, or at its end, before the server's
// Close, which waits for the requests).
func gatedView(t *testing.T, d *daemon, o Options) (src *gatedSource, view *Server, srv *httptest.Server, release func()) {
	t.Helper()
	src = &gatedSource{Source: d.worker, release: make(chan struct{})}
	o.Token, o.Source, o.Node = testToken, src, testNode
	view, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(view)
	t.Cleanup(srv.Close)
	var once sync.Once
	release = func() { once.Do(func() { close(src.release) }) }
	t.Cleanup(release)
	return src, view, srv, release
}

// getStatus sends the status of a GET of url to codes (0: no answer).
func getStatus(url string, codes chan<- int) { getStatusVia(viewClient, url, codes) }

// getStatusVia is getStatus through client.
func getStatusVia(client *http.Client, url string, codes chan<- int) {
	resp, err := client.Get(url)
	if err != nil {
		codes <- 0
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	codes <- resp.StatusCode
}

// TestPageAndTreeShareOneRead: the page's data and its tree, asked
// together (as the page's preloads ask), wait for one read of the session.
func TestPageAndTreeShareOneRead(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "hello"))
	d.waitEntries(sid1, 1)
	src, view, srv, release := gatedView(t, d, Options{})
	codes := make(chan int, 2)
	go getStatus(srv.URL+"/api/s/"+sid1, codes)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		return src.reads.Load() == 1, "the first request reading"
	})
	go getStatus(srv.URL+"/api/s/"+sid1+"/tree", codes)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		view.mu.Lock()
		defer view.mu.Unlock()
		f := view.reading[sid1]
		return f != nil && f.waiting == 1, "the second request waiting for the first's read"
	})
	release()
	for range 2 {
		if c := <-codes; c != 200 {
			t.Errorf("status %d", c)
		}
	}
	if n := src.reads.Load(); n != 1 {
		t.Errorf("%d reads for the page and its tree together, want 1", n)
	}
}

// TestSessionPageReadsAhead: the session page's own request reads the
// session (after the page is sent), and its data is then served from that
// read.
func TestSessionPageReadsAhead(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "hello"))
	d.waitEntries(sid1, 1)
	src, srv := countedView(t, d)
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := viewClient.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		return resp
	}
	get("/s/" + sid1)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		return src.reads.Load() == 1, "the page's read"
	})
	get("/api/s/" + sid1)
	get("/api/s/" + sid1 + "/tree")
	if n := src.reads.Load(); n != 1 {
		t.Errorf("%d reads for the page, its data and its tree, want 1", n)
	}
	get("/") // the list page reads nothing
	if n := src.reads.Load(); n != 1 {
		t.Errorf("%d reads after the list page, want 1", n)
	}
}

// TestSessionPagePreloadsItsData: the session page names its data URL in
// a preload Link header (and its tree's), exactly as session.js asks for
// them, so the fetches start while the scripts load; an id that would need escaping gets none.
func TestSessionPagePreloadsItsData(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "hello"))
	d.waitEntries(sid1, 1)
	resp, _ := d.get("/s/" + sid1)
	want := "</api/s/" + sid1 + ">; rel=preload; as=fetch; crossorigin, </api/s/" + sid1 + "/tree>; rel=preload; as=fetch; crossorigin"
	if got := resp.Header.Get("Link"); got != want {
		t.Errorf("Link %q, want %q", got, want)
	}
	if resp, _ := d.get("/s/a%3Cb"); resp.Header.Get("Link") != "" {
		t.Errorf("an id with '<' got a preload: %q", resp.Header.Get("Link"))
	}
}

// TestWholeSessionReadsAreBounded: no more than MaxReads requests read a
// whole session at once, whichever reads it (its data, the session page's
// read ahead, an image of it); the next waits its turn and is answered
// once one is done. Event streams past MaxStreams are refused.
func TestWholeSessionReadsAreBounded(t *testing.T) {
	const sid2, sid3 = "11111111-0000-4000-8000-000000000002", "11111111-0000-4000-8000-000000000003"
	d := startDaemon(t)
	for _, sid := range []string{sid1, sid2, sid3} {
		d.write(sid, testenv.Header(sid), testenv.Entry("u1", "", "hello"))
		d.waitEntries(sid, 1)
	}
	src, view, srv, release := gatedView(t, d, Options{MaxReads: 2, MaxStreams: 1})
	codes := make(chan int, 4)
	for _, sid := range []string{sid2, sid3} {
		go getStatus(srv.URL+"/api/s/"+sid, codes)
	}
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		return src.reads.Load() == 2, fmt.Sprintf("%d reading; want two", src.reads.Load())
	})
	// Both slots taken: the page's read ahead and an image's read wait too.
	// Each on a connection of its own, kept open as a browser keeps it: on
	// one connection the image's request would wait for the page's to end,
	// and a closed one ends the page's read ahead.
	for _, path := range []string{"/s/" + sid1, "/api/s/" + sid1 + "/image/u1/0"} {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		go getStatusVia(&http.Client{Transport: tokenTransport{base: tr}}, srv.URL+path, codes)
	}
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		return view.queued.Load() == 2, fmt.Sprintf("%d reading, %d waiting; want two reading, two waiting", src.reads.Load(), view.queued.Load())
	})
	if n := src.reads.Load(); n != 2 {
		t.Errorf("%d reading while both slots are taken, want 2", n)
	}
	release()
	var got []int
	for range 4 {
		got = append(got, <-codes)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{200, 200, 200, 404}) { // the entry has no image
		t.Errorf("statuses %v, want 200 (two data, the page), 404 (no image there)", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events?format=ndjson", nil)
	first, err := viewClient.Do(req)
	if err != nil || first.StatusCode != 200 {
		t.Fatalf("the first stream: %v %v", first, err)
	}
	defer first.Body.Close()
	if resp, err := viewClient.Get(srv.URL + "/api/events?format=ndjson"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a stream past the bound: %v %v, want 503", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestKeptSnapshotsForgotten: a kept snapshot goes once unused for
// KeepFor, and the next page reads the session again; kept for the
// daemon's life, big ones kept the collector busy on an idle daemon.
func TestKeptSnapshotsForgotten(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "hello"))
	d.waitEntries(sid1, 1)
	src := &countingSource{Source: d.worker}
	view, srv := serveView(t, Options{Source: src, KeepFor: 50 * time.Millisecond})
	fetch(t, srv.URL+"/api/s/"+sid1)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		view.mu.Lock()
		defer view.mu.Unlock()
		return len(view.snaps) == 0, fmt.Sprintf("%d snapshots kept", len(view.snaps))
	})
	fetch(t, srv.URL+"/api/s/"+sid1)
	if n := src.reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2: the second page after the snapshot was forgotten", n)
	}
}
