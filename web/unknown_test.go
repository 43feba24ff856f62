package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/projection"
)

// TestUnknownSessionIsNotFound: every address of a session no stream
// holds answers 404, the API's naming it (the page, a static shell, shows
// that answer); one the streams hold answers as before. (Before, the session
// and its tree answered 200, empty: a stream info's subject filter
// narrows only its list of subjects, not its count of messages.)
func TestUnknownSessionIsNotFound(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "hello"))
	d.waitEntries(sid1, 1)
	const unknown = "0198c0de-dead-7000-8000-00000000beef"
	for _, p := range []string{"/s/", "/api/s/", "/api/s/%s/tree", "/api/s/%s/context", "/api/s/%s/branch?leaf=u1"} {
		path := strings.Replace(p, "%s", unknown, 1)
		if !strings.Contains(p, "%s") {
			path = p + unknown
		}
		resp, body := d.get(path)
		if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(p, "/s/") && !strings.Contains(body, unknown) {
			t.Errorf("%s: %d %.200q, want 404 naming the session", path, resp.StatusCode, body)
		}
		known := strings.Replace(path, unknown, sid1, 1)
		if resp, body := d.get(known); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %.200q, want 200", known, resp.StatusCode, body)
		}
	}
}

// TestSessionPageStatus: a session's page answers with its data's status,
// the same shell either way: 200 for a session the catalog does not list
// (yet) but a stream holds, read once before the answer and kept for the
// page's data; 404 for one no stream holds; 400 for an id no session can
// have (too long for a subject token).
func TestSessionPageStatus(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "hello"))
	d.waitEntries(sid1, 1)
	src := &unlistedSource{countingSource{Source: d.worker}}
	_, srv := serveView(t, Options{Source: src})
	get := func(path string) (int, string) { t.Helper(); return fetch(t, srv.URL+path) }
	code, shell := get("/s/" + sid1)
	if code != http.StatusOK || !strings.Contains(shell, "<html") {
		t.Fatalf("an unlisted held session's page: %d %.200q, want 200 and the shell", code, shell)
	}
	if n := src.reads.Load(); n != 1 {
		t.Errorf("%d reads for the page, want 1", n)
	}
	for path, want := range map[string]int{
		"/s/0198c0de-dead-7000-8000-00000000beef": http.StatusNotFound,
		"/s/a%3Cb":                       http.StatusNotFound,
		"/s/" + strings.Repeat("x", 400): http.StatusBadRequest, // too long for a subject
	} {
		if code, body := get(path); code != want || body != shell {
			t.Errorf("%s: %d, the shell %v; want %d and the shell", path, code, body == shell, want)
		}
	}
}

// unlistedSource is a source whose catalog lists nothing, as the catalog
// is for a moment after a session's first line is stored.
type unlistedSource struct{ countingSource }

func (*unlistedSource) Catalog(context.Context) ([]projection.CatalogEntry, error) { return nil, nil }
