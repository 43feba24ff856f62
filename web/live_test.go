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
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid1)))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1' && document.getElementById('live').className === 'live on'`)
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
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid1)))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1' && document.getElementById('live').className === 'live on'`)
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
