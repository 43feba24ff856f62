package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

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
	src := &countingSource{Source: d.worker}
	view, err := New(Options{Source: src, Node: testNode})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(view)
	defer srv.Close()
	page := func(path string) sessionView {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		var v sessionView
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	first := page("/api/s/" + sid1)
	again := page("/api/s/" + sid1)
	page("/api/s/" + sid1 + "/branch?leaf=a1")
	if n := src.reads.Load(); n != 1 {
		t.Errorf("%d reads of the session for a page, a reload and a branch switch; want 1", n)
	}
	if len(again.Tree) != 3 || again.Pos != first.Pos || again.Usage[0].Tokens != first.Usage[0].Tokens {
		t.Errorf("the reload differs: %d rows, pos %q/%q", len(again.Tree), again.Pos, first.Pos)
	}

	testenv.AppendFile(t, path, testenv.Entry("u2", "r1", "more")+"\n")
	d.waitEntries(sid1, 4)
	after := page("/api/s/" + sid1)
	if n := src.reads.Load(); n != 2 {
		t.Errorf("%d reads after the session moved, want 2", n)
	}
	if len(after.Tree) != 4 || after.Leaf != "u2" || after.Pos == first.Pos {
		t.Errorf("after an append: %d rows, leaf %q, pos %q (was %q)", len(after.Tree), after.Leaf, after.Pos, first.Pos)
	}
}

// TestSessionPagePreloadsItsData: the session page names its data URL in
// a preload Link header, exactly as session.js asks for it, so the fetch
// starts while the scripts load; an id that would need escaping gets none.
func TestSessionPagePreloadsItsData(t *testing.T) {
	d := startDaemon(t)
	resp, _ := d.get("/s/" + sid1)
	if got, want := resp.Header.Get("Link"), "</api/s/"+sid1+">; rel=preload; as=fetch; crossorigin"; got != want {
		t.Errorf("Link %q, want %q", got, want)
	}
	if resp, _ := d.get("/s/a%3Cb"); resp.Header.Get("Link") != "" {
		t.Errorf("an id with '<' got a preload: %q", resp.Header.Get("Link"))
	}
}
