package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestBrowserSearchHitToEntry: a word from an entry off the leaf's branch,
// typed in the list's search box, gives a hit whose link opens the session
// on that entry's branch with the entry marked; a query that matches
// nothing says so; a hit's snippet of hostile text stays text.
func TestBrowserSearchHitToEntry(t *testing.T) {
	b := newBrowser(t)
	d := startDaemonSearch(t, true)
	d.write(sid1,
		testenv.Header(sid1),
		testenv.Entry("u1", "", "hello"),
		assistant("a1", "u1", "the zanzibarquux plan <img src=x onerror=alert(1)>", "c1"),
		toolResult("r1", "a1", "c1", "done"),
		testenv.EntryAt("u2", "u1", "2026-11-29T23:08:21.000Z", "another branch, the leaf"),
	)
	d.waitEntries(sid1, 4)
	// The index follows the stream: wait for the hit through the API.
	testenv.WaitFor(t, time.Minute, func() (bool, string) {
		_, body := d.get("/api/search?q=" + url.QueryEscape("zanzibarquux"))
		var r struct {
			Hits []struct {
				SessionID string `json:"sessionId"`
				EntryID   string `json:"entryId"`
			} `json:"hits"`
		}
		if json.Unmarshal([]byte(body), &r) != nil {
			return false, body
		}
		return len(r.Hits) == 1 && r.Hits[0].EntryID == "a1", body
	})

	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/")))
	b.waitJS(t, 20*time.Second, `document.readyState === 'complete'`)
	// The list drawn, its first message in: a hit names its session so.
	b.waitJS(t, 20*time.Second, `document.querySelector('a.row .first')?.textContent === 'hello'`)
	b.do(t, chromedp.SendKeys(chromedp.CSS(`#q`), "nothingmatchesthis\n"))
	b.waitJS(t, 10*time.Second, `document.querySelector('#search-results .note')?.textContent === '0 hits'`)
	// A query refused says why in words, not as the API's JSON (it
	// showed {"error":"search: bad query: …"}).
	eval[bool](t, b, `(document.getElementById('q').value = '') === ''`)
	b.do(t, chromedp.SendKeys(chromedp.CSS(`#q`), "*\n"))
	b.waitJS(t, 10*time.Second, `(document.querySelector('#search-results .note')?.textContent || '').indexOf('nothing to search for') >= 0`)
	if note := eval[string](t, b, `document.querySelector('#search-results .note').textContent`); strings.Contains(note, "{") {
		t.Errorf("a refused query shows %q", note)
	}

	eval[bool](t, b, `(document.getElementById('q').value = '') === ''`)
	b.do(t, chromedp.SendKeys(chromedp.CSS(`#q`), "zanzibarquux\n"))
	b.waitJS(t, 10*time.Second, `document.querySelectorAll('#search-results a.hit').length === 1`)
	if snip := eval[string](t, b, `document.querySelector('#search-results a.hit .snippet').textContent`); !strings.Contains(snip, "zanzibarquux") {
		t.Errorf("hit snippet %q does not show the word", snip)
	}
	if m := eval[string](t, b, `[...document.querySelectorAll('#search-results a.hit mark')].map(e => e.textContent).join('|')`); m != "zanzibarquux" {
		t.Errorf("marked in the snippet: %q, want the word", m)
	}
	if n := eval[string](t, b, `document.querySelector('#search-results .note').textContent`); n != "1 hit" {
		t.Errorf("count %q", n)
	}
	// The hit says which session (as the list names it: its first
	// message), where, and when, as the list shows times.
	if m := eval[string](t, b, `document.querySelector('#search-results a.hit .note').textContent`); m != "hello · /home/u/p · "+testNode+" · assistant · 2026-11-29 23:08" {
		t.Errorf("the hit's line %q", m)
	}
	if n := eval[int](t, b, `document.querySelectorAll('#search-results img').length`); n != 0 {
		t.Errorf("the snippet's <img> became an element (%d)", n)
	}
	b.screenshot(t, "search")
	b.do(t, chromedp.Click(chromedp.CSS(`#search-results a.hit`)))
	// a1 is off the leaf's branch (u2): the page switches to it and marks it.
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1' && document.getElementById('e-a1')?.classList.contains('target')`)
	if eval[bool](t, b, `!!document.getElementById('e-u2')`) {
		t.Error("the leaf's branch is shown, not the hit's")
	}
	if b.dialogs.Load() != 0 {
		t.Error("a session's text opened a dialog")
	}
}

// TestBrowserSearchUnindexed: an answer that says the index has lines yet
// to read (its first build) is shown with its hits and that note, so that
// "0 hits" is not read as no match.
func TestBrowserSearchUnindexed(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	stub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"query":"x","total":0,"hits":[],"unindexed":1234}`)
	})
	web, err := New(Options{Token: testToken, Source: d.worker, Node: testNode, Search: stub})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web)
	defer closeServer(srv)
	b.do(t, chromedp.Navigate(viewLink(srv.URL+"/")))
	b.waitJS(t, 20*time.Second, `document.readyState === 'complete'`)
	b.do(t, chromedp.SendKeys(chromedp.CSS(`#q`), "anything\n"))
	b.waitJS(t, 10*time.Second, `!!document.querySelector('#search-results .note')?.textContent.includes('yet to add')`)
	if n := eval[string](t, b, `document.querySelector('#search-results .note').textContent`); n != "0 hits (the index has yet to add 1234 lines: hits among them are missing)" {
		t.Errorf("note %q", n)
	}
}
