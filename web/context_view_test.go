package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestBrowserContextWindowAndLive: "what the model sees" shows the last
// pageEntries messages of a long context, the earlier ones on request, and
// follows pi as it writes (before, the whole context went into the page at
// once, freezing it for seconds on a large session, and a new entry
// changed the history but never the context shown).
func TestBrowserContextWindowAndLive(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	const n = pageEntries + 50
	lines := []string{testenv.Header(sid1)}
	parent := ""
	for i := range n {
		id := fmt.Sprintf("m%04d", i)
		lines = append(lines, testenv.Entry(id, parent, fmt.Sprintf("message %d", i)))
		parent = id
	}
	path := d.write(sid1, lines...)
	d.waitEntries(sid1, n)
	b.openLive(t, d.http.URL+"/s/"+sid1)
	b.do(t, chromedp.Click(chromedp.CSS(`#v-context`)))
	b.waitJS(t, 20*time.Second, `document.getElementById('context').dataset.shown !== undefined`)
	if got := eval[string](t, b, `document.getElementById('context').dataset.messages + '/' + document.getElementById('context').dataset.shown`); got != fmt.Sprintf("%d/%d", n, pageEntries) {
		t.Errorf("messages/shown %s, want %d/%d", got, n, pageEntries)
	}
	if eval[bool](t, b, `document.getElementById('context').textContent.includes('message 0 ')`) {
		t.Error("the first message is on the page before it was asked for")
	}
	b.do(t, chromedp.Click(chromedp.CSS(`#ctx-earlier`)))
	b.waitJS(t, 20*time.Second, fmt.Sprintf(`+document.getElementById('context').dataset.shown === %d && document.getElementById('ctx-earlier').hidden`, n))
	got := eval[[]string](t, b, `Array.from(document.querySelectorAll('#context .entry')).map(function (e) { return e.textContent.match(/message \d+/)[0]; })`)
	if len(got) != n || got[0] != "message 0" || got[n-1] != fmt.Sprintf("message %d", n-1) {
		t.Errorf("%d messages shown in order? first %q last %q", len(got), got[0], got[len(got)-1])
	}

	// pi writes on: the context shown follows.
	testenv.AppendFile(t, path, testenv.Entry("live1", parent, "the live question")+"\n")
	b.waitJS(t, 20*time.Second, fmt.Sprintf(`+document.getElementById('context').dataset.messages === %d && document.getElementById('context').textContent.includes('the live question')`, n+1))

	// The API's window, asked for directly.
	resp, body := d.get("/api/s/" + sid1 + "/context/view?start=10&end=20")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"start":10,"end":20`) || strings.Count(body, `<article`) != 10 {
		t.Errorf("window 10-20: %d %.300s", resp.StatusCode, body)
	}
}

// TestBrowserTreeByKeyboardAndMovedBranch: the tree's rows are reached
// and chosen by keyboard, and a reader at pi's leaf is told when pi goes on
// on another branch, with a button that shows it.
func TestBrowserTreeByKeyboardAndMovedBranch(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	path := d.write(sid1, testenv.Header(sid1),
		testenv.Entry("u1", "", "one"), testenv.Entry("u2", "u1", "two"), testenv.Entry("u3", "u2", "three"))
	d.waitEntries(sid1, 3)
	b.openLive(t, d.http.URL+"/s/"+sid1)
	if n := eval[int](t, b, `document.querySelectorAll('#tree li[tabindex="0"]').length`); n != 1 {
		t.Errorf("%d tree rows in the Tab order, want 1", n)
	}

	// pi branches from u1 (a fork, or /tree): the page stays, and says so.
	testenv.AppendFile(t, path, testenv.Entry("v2", "u1", "another way")+"\n"+testenv.Entry("v3", "v2", "on it")+"\n")
	b.waitJS(t, 20*time.Second, `document.body.dataset.live === '2'`)
	if !eval[bool](t, b, `!document.getElementById('moved').hidden && !!document.getElementById('e-u3') && !document.getElementById('e-v3')`) {
		t.Fatal("pi's new branch is not announced, or the page left the reader's branch")
	}
	b.do(t, chromedp.Click(chromedp.CSS(`#moved`)))
	b.waitJS(t, 20*time.Second, `!!document.getElementById('e-v3') && document.getElementById('moved').hidden`)

	// By keyboard: to u3's row (up from v3's? the rows are the server's
	// order), then Enter shows its branch.
	eval[bool](t, b, `(document.querySelector('#tree li[data-id="u1"]').focus(), true)`)
	want := eval[string](t, b, `(function () { var li = Array.from(document.querySelectorAll('#tree li')).sort(function (a, b) { return parseInt(a.style.top) - parseInt(b.style.top); }); var i = li.findIndex(function (x) { return x.dataset.id === 'u1'; }); return li[i + 1].dataset.id; })()`)
	b.do(t, chromedp.KeyEvent(kb.ArrowDown))
	if got := eval[string](t, b, `document.activeElement.dataset.id || ''`); got != want {
		t.Fatalf("focus on %q after the down arrow, want %q", got, want)
	}
	b.do(t, chromedp.KeyEvent(kb.Enter))
	b.waitJS(t, 20*time.Second, fmt.Sprintf(`document.body.dataset.selected === %q`, want))

	// The list's sort headers are in the Tab order and sort on Enter.
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/")))
	b.waitJS(t, 20*time.Second, `document.querySelectorAll('#list-head [data-sort][tabindex="0"]').length === 9`)
	if resp, _ := d.get("/favicon.ico"); resp.StatusCode != http.StatusNoContent {
		t.Errorf("favicon: %d, want 204", resp.StatusCode)
	}
}
