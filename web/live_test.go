package web

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestBrowserLivePi has real pi (pi-oracle write) append to a session
// open in the page: its entries appear without a reload.
func TestBrowserLivePi(t *testing.T) {
	testenv.Oracle(t) // skips without node, saying so
	b := newBrowser(t)
	d := startDaemon(t)
	path := d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "before"))
	d.waitEntries(sid1, 1)
	b.openLive(t, d.http.URL+"/s/"+sid1)
	eval[bool](t, b, `(window.__samePage = true)`)

	steps := []map[string]any{
		{"op": "user", "text": "live **question**"},
		{"op": "assistant", "text": "live answer", "toolCalls": []map[string]any{{"id": "c1", "name": "bash", "arguments": map[string]any{"command": "ls"}}}},
		{"op": "toolResult", "toolCallId": "c1", "toolName": "bash", "text": "a b"},
	}
	script := filepath.Join(t.TempDir(), "script.json")
	raw, _ := json.Marshal(steps)
	if err := os.WriteFile(script, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := testenv.RunOracle(t, time.Minute, "write", filepath.Dir(path), "--open", path, "--script", script)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var step struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(l), &step) == nil && step.ID != "" {
			ids = append(ids, step.ID)
		}
	}
	if len(ids) != len(steps) {
		t.Fatalf("pi wrote %d entries (%s), want %d", len(ids), out, len(steps))
	}
	for _, id := range ids {
		b.waitJS(t, 20*time.Second, fmt.Sprintf(`document.querySelectorAll('[id="e-%s"]').length === 1`, id))
	}
	if !eval[bool](t, b, `window.__samePage === true && !!document.querySelector('#entries strong')`) {
		t.Error("the page reloaded, or the markdown was not rendered")
	}
	b.screenshot(t, "session-live")
}

// TestBrowserReconnectMissesNothing drops the page's event stream on the
// server side and appends while it is down: the page resumes from its
// last event id and shows every entry once, without a reload.
func TestBrowserReconnectMissesNothing(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	path := d.write(sid1, testenv.Header(sid1), testenv.Entry("u0", "", "start"))
	d.waitEntries(sid1, 1)
	b.openLive(t, d.http.URL+"/s/"+sid1)
	eval[bool](t, b, `(window.__samePage = true)`)
	parent := "u0"
	add := func(from, to int) {
		for i := from; i < to; i++ {
			id := fmt.Sprintf("u%d", i)
			testenv.AppendFile(t, path, testenv.Entry(id, parent, "entry "+id)+"\n")
			parent = id
		}
	}
	add(1, 4)
	b.waitJS(t, 20*time.Second, `!!document.getElementById('e-u3')`)
	for round := 0; round < 3; round++ {
		d.http.CloseClientConnections()
		add(4+round*3, 7+round*3)
	}
	b.waitJS(t, 30*time.Second, `!!document.getElementById('e-u12')`)
	for i := 0; i <= 12; i++ {
		if n := eval[int](t, b, fmt.Sprintf(`document.querySelectorAll('[id="e-u%d"]').length`, i)); n != 1 {
			t.Errorf("entry u%d shown %d times", i, n)
		}
	}
	if n := eval[int](t, b, `document.querySelectorAll('#entries article.entry').length`); n != 13 {
		t.Errorf("%d entries shown, want 13", n)
	}
	if n := eval[int](t, b, `document.querySelectorAll('#tree li').length`); n != 13 {
		t.Errorf("%d tree rows, want 13", n)
	}
	if !eval[bool](t, b, `window.__samePage === true`) {
		t.Error("the page reloaded")
	}
}

// TestBrowserLiveTreeFollowsPi: entries appended while the page is open,
// on a new branch, a label and a new name, show as a reload shows them:
// pi's leaf is the entry appended last, a new branch sits under its
// parent, a label shows on its entry, the name in the title. Entry ids
// that are names of an object's own properties ("constructor", "toString")
// are ids like any other, and a link with a malformed escape opens the
// page.
func TestBrowserLiveTreeFollowsPi(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	path := d.write(sid1, testenv.Header(sid1),
		testenv.Entry("constructor", "", "one"), testenv.Entry("toString", "constructor", "two"),
		testenv.Entry("b3", "toString", "three"), testenv.Entry("b4", "b3", "four"))
	d.waitEntries(sid1, 4)
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid1)+"#e-%E0%A4"))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1' && document.getElementById('live').className === 'live on'`)
	if n := eval[int](t, b, `document.querySelectorAll('#entries article.entry').length`); n != 4 {
		t.Fatalf("%d entries drawn, want 4", n)
	}
	testenv.AppendFile(t, path, strings.Join([]string{
		testenv.Entry("b5", "b4", "five"),
		testenv.Entry("b6", "toString", "a branch"),
		testenv.Entry("b7", "b6", "on the branch"),
		`{"type":"label","id":"b8","parentId":"b7","timestamp":"2026-11-29T23:09:00.000Z","targetId":"constructor","label":"live label"}`,
		`{"type":"session_info","id":"b9","parentId":"b8","timestamp":"2026-11-29T23:09:01.000Z","name":"renamed live"}`,
	}, "\n")+"\n")
	b.waitJS(t, 20*time.Second, `document.body.dataset.live === '5'`)

	// What a reload draws: the server's tree.
	_, body := d.get("/api/s/" + sid1 + "/tree")
	var tv treeView
	if err := json.Unmarshal([]byte(body), &tv); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range tv.Tree {
		want = append(want, fmt.Sprintf("%s:%d", r.ID, r.Depth))
	}
	got := eval[[]string](t, b, `Array.from(document.querySelectorAll('#tree li')).sort(function (a, b) { return parseInt(a.style.top) - parseInt(b.style.top); }).map(function (li) { return li.dataset.id + ':' + ((parseInt(li.style.paddingLeft) - 4) / 12); })`)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tree rows live:\n got %v\nwant %v (the server's)", got, want)
	}
	if l := eval[string](t, b, `(document.querySelector('#tree li.leaf') || {dataset: {}}).dataset.id || ''`); l != tv.Leaf || l != "b9" {
		t.Errorf("leaf %q, pi's is %q", l, tv.Leaf)
	}
	if l := eval[string](t, b, `(document.querySelector('#tree li[data-id="constructor"] .label') || {}).textContent || ''`); l != "live label" {
		t.Errorf("tree label %q", l)
	}
	if l := eval[string](t, b, `(document.querySelector('article[id="e-constructor"] .label') || {}).textContent || ''`); l != "live label" {
		t.Errorf("entry label %q", l)
	}
	if n := eval[string](t, b, `document.getElementById('title').textContent`); n != "renamed live" {
		t.Errorf("title %q", n)
	}
	if n := eval[string](t, b, `Array.from(document.querySelectorAll('#meta .kv')).map(function (r) { return r.textContent; }).join('|')`); !strings.Contains(n, "entries9") {
		t.Errorf("meta %q, want 9 entries", n)
	}
}

// TestBrowserHiddenTabLetsGoOfItsStream: a browser keeps six connections
// to a host, and each page's event stream held one: a seventh tab of the
// view never loaded. A hidden tab closes its stream and, shown again,
// resumes where it left off: what was appended meanwhile shows once.
func TestBrowserHiddenTabLetsGoOfItsStream(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	path := d.write(sid1, testenv.Header(sid1), testenv.Entry("u0", "", "start"))
	d.waitEntries(sid1, 1)
	b.openLive(t, d.http.URL+"/s/"+sid1)
	if n := len(d.web.streams); n != 1 {
		t.Fatalf("%d event streams open, want the page's", n)
	}
	visible := func(v bool) {
		eval[bool](t, b, fmt.Sprintf(`Object.defineProperty(document, 'hidden', {value: %v, configurable: true}); document.dispatchEvent(new Event('visibilitychange')); true`, !v))
	}
	visible(false)
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
		return len(d.web.streams) == 0, fmt.Sprintf("%d event streams open with the tab hidden", len(d.web.streams))
	})
	parent := "u0"
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("u%d", i)
		testenv.AppendFile(t, path, testenv.Entry(id, parent, "entry "+id)+"\n")
		parent = id
	}
	d.waitEntries(sid1, 4)
	visible(true)
	b.waitJS(t, 20*time.Second, `!!document.getElementById('e-u3') && document.getElementById('live').className === 'live on'`)
	for i := 0; i <= 3; i++ {
		if n := eval[int](t, b, fmt.Sprintf(`document.querySelectorAll('[id="e-u%d"]').length`, i)); n != 1 {
			t.Errorf("entry u%d shown %d times", i, n)
		}
	}
}

// TestBrowserRefusedStreamRetried: an event stream the daemon refused
// (every slot taken) ended the page's live updates for good, EventSource
// giving up on an answer other than 200, with no word why. The page says
// why and tries again until it is let in.
func TestBrowserRefusedStreamRetried(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u0", "", "start"))
	d.waitEntries(sid1, 1)
	for len(d.web.streams) < cap(d.web.streams) {
		d.web.streams <- struct{}{}
	}
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid1)))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1' && document.getElementById('live').title.indexOf('refused') >= 0`)
	for len(d.web.streams) > 0 {
		<-d.web.streams
	}
	b.waitJS(t, 40*time.Second, `document.getElementById('live').className === 'live on'`)
}

// TestBrowserDeepTreeRowsReadable: a session that branches at every step
// (each retry a new branch) nests pi's leaf 40 branch points deep. At 12
// px a level the tree's rows had no room left for their text from about
// 25 levels on (a probe on 2026-12-06); the leaf's row shows its text.
func TestBrowserDeepTreeRowsReadable(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	lines := []string{testenv.Header(sid1)}
	parent := ""
	for i := range 40 {
		u, side, main := fmt.Sprintf("u%d", i), fmt.Sprintf("s%d", i), fmt.Sprintf("m%d", i)
		lines = append(lines, testenv.Entry(u, parent, fmt.Sprintf("main %d", i)),
			assistant(side, u, fmt.Sprintf("side %d", i), ""), assistant(main, u, fmt.Sprintf("main reply %d", i), ""))
		parent = main
	}
	d.write(sid1, lines...)
	d.waitEntries(sid1, 120)
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid1)))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1'`)
	// The tree draws the rows in view: scrolled to its end, the leaf's.
	eval[bool](t, b, `(function (p) { while (p && p.scrollHeight <= p.clientHeight) p = p.parentElement; if (p) { p.scrollTop = p.scrollHeight; p.dispatchEvent(new Event('scroll')); } return true; })(document.getElementById('tree'))`)
	b.waitJS(t, 20*time.Second, `!!document.querySelector('#tree li[data-id="m39"]')`)
	// The part of the text's box inside the row's and the panel's.
	w := eval[float64](t, b, `(function () {
		var li = document.querySelector('#tree li[data-id="m39"]'), x = li.querySelector('.text').getBoundingClientRect();
		var r = li.getBoundingClientRect(), p = document.getElementById('tree').getBoundingClientRect();
		var cs = getComputedStyle(li), left = r.left + parseFloat(cs.paddingLeft);
		return Math.max(0, Math.min(x.right, r.right, p.right) - Math.max(x.left, left, p.left));
	})()`)
	panel := eval[float64](t, b, `document.getElementById('tree').getBoundingClientRect().width`)
	if w < 80 {
		t.Errorf("the leaf's row, 40 levels deep, shows its text in %.0f px of a %.0f px panel", w, panel)
	}
}
