package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestBrowserNewestAndAddress: a long session opens at
// its newest entry, in the history and in the tree (it opened at the top
// of its last 200); the entry and the view a reader picks are in the
// page's address, so a reload keeps them (it kept neither), and an
// entry's address pasted into the tab shows it (a web probe, 2026-12-07).
func TestBrowserNewestAndAddress(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	const n = 300
	lines := []string{testenv.Header(sid1)}
	parent := ""
	for i := range n {
		id := fmt.Sprintf("e%03d", i)
		lines = append(lines, testenv.Entry(id, parent, fmt.Sprintf("message %d\n\nwith a second paragraph", i)))
		parent = id
	}
	d.write(sid1, lines...)
	d.waitEntries(sid1, n)
	b.openLive(t, d.http.URL+"/s/"+sid1)
	// The newest entry is in the history's view, and its row in the tree's.
	inView := func(el, box string) string {
		return `(function () { var e = ` + el + `, m = ` + box + `.getBoundingClientRect();
			if (!e) return false; var r = e.getBoundingClientRect(); return r.top >= m.top - 1 && r.bottom <= m.bottom + 1; })()`
	}
	b.waitJS(t, 10*time.Second, inView(`document.getElementById('e-e299')`, `document.querySelector('.main')`))
	b.waitJS(t, 10*time.Second, inView(`document.querySelector('#tree li.leaf')`, `document.querySelector('.side')`))

	// An entry not on the page, by its address in the tab.
	b.do(t, chromedp.Evaluate[chromedp.Void](`location.hash = '#e-e010'`))
	b.waitJS(t, 10*time.Second, `document.body.dataset.selected === 'e010' && document.getElementById('e-e010')`)
	b.do(t, chromedp.Click(chromedp.CSS(`#v-context`)))
	b.waitJS(t, 10*time.Second, `document.getElementById('context').dataset.messages !== undefined`)
	if got := eval[string](t, b, `location.search + location.hash`); got != "?view=context#e-e010" {
		t.Fatalf("the address after picking e010 and the model's view: %q", got)
	}
	b.do(t, chromedp.Reload())
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1'`)
	b.waitJS(t, 10*time.Second, `document.getElementById('e-e010') && !document.getElementById('context').hidden && document.getElementById('v-context').classList.contains('on')`)
	b.do(t, chromedp.Click(chromedp.CSS(`#v-history`)))
	if got := eval[string](t, b, `location.search + location.hash`); got != "#e-e010" {
		t.Errorf("the address after going back to the history: %q", got)
	}
}

// TestBrowserNarrowScreen: at 400 px wide the session's entries take the
// width (the side panel goes above them) and neither page is wider than
// the screen (the entries had about 110 px, the list was 1050 px wide: a
// web probe, 2026-12-07).
func TestBrowserNarrowScreen(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", strings.Repeat("a long message that wraps ", 40)))
	d.waitEntries(sid1, 1)
	b.do(t, chromedp.EmulateViewport(400, 800))
	b.openLive(t, d.http.URL+"/s/"+sid1)
	if w := eval[float64](t, b, `document.getElementById('e-u1').getBoundingClientRect().width`); w < 300 {
		t.Errorf("at 400 px the entry is %.0f px wide", w)
	}
	for _, page := range []string{"/s/" + sid1, "/"} {
		b.do(t, chromedp.Navigate(d.http.URL+page))
		b.waitJS(t, 20*time.Second, `document.body.dataset.drawn === '1' || document.querySelector('#list-inner .row')`)
		if w := eval[float64](t, b, `document.documentElement.scrollWidth`); w > 400 {
			t.Errorf("%s at 400 px is %.0f px wide", page, w)
		}
	}
	// The list: its rows take the height left, and show the session.
	if h := eval[float64](t, b, `document.getElementById('list').getBoundingClientRect().bottom`); h < 700 || h > 801 {
		t.Errorf("the list ends at %.0f px of 800", h)
	}
}

// TestBrowserNonStringIDs: entries whose id is a number or an object
// (hand-made files) are in the tree, none of them shown as selected, and a
// click on one says why it cannot be shown on its own (each showed as
// selected at load, and a click showed the leaf's branch: a web probe,
// 2026-12-07).
func TestBrowserNonStringIDs(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1),
		testenv.Entry("u1", "", "a string id"),
		`{"type":"message","id":12345,"parentId":"u1","timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"user","content":"a number id"}}`,
		`{"type":"message","id":{"a":"<b>"},"parentId":"u1","timestamp":"2026-11-29T23:08:19.000Z","message":{"role":"user","content":"an object id"}}`,
		testenv.EntryAt("u4", "u1", "2026-11-29T23:08:20.000Z", "the leaf"),
	)
	d.waitEntries(sid1, 4)
	b.openLive(t, d.http.URL+"/s/"+sid1)
	if n := eval[int](t, b, `document.querySelectorAll('#tree li.node').length`); n != 4 {
		t.Fatalf("the tree has %d rows, want 4", n)
	}
	if n := eval[int](t, b, `document.querySelectorAll('#tree li.selected, #tree li.leaf').length`); n != 1 {
		t.Errorf("%d rows selected or leaf, want the leaf alone", n)
	}
	b.do(t, chromedp.Click(chromedp.CSS(`#tree li[data-id=""]`)))
	b.waitJS(t, 10*time.Second, `document.getElementById('status').textContent.indexOf('not a string') >= 0`)
	if got := eval[string](t, b, `location.hash + '|' + (document.body.dataset.selected || '')`); got != "|" {
		t.Errorf("after the click: hash and selection %q", got)
	}
}
