package web

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// The browser tests drive Debian's chromium headless through chromedp.
// Without chromium they skip, saying so; under CI=true they fail instead
// (.ci/run installs it).

func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("web: chromium is not installed, and CI must run the browser tests (apt-get install chromium)")
	}
	t.Skip("web: chromium is not installed; skipping the browser test (apt-get install chromium)")
	return ""
}

// openLive opens the view at url and waits until the page is drawn and
// its live stream is up.
func (b *browser) openLive(t testing.TB, url string) {
	t.Helper()
	b.do(t, chromedp.Navigate(viewLink(url)))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1' && document.getElementById('live').className === 'live on'`)
}

// browser is one headless tab. Dialogs (alert, confirm) are counted: a
// session's text must never open one.
type browser struct {
	ctx     context.Context
	dialogs atomic.Int32
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // root in a container
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 800),
		// Its shared memory files (disable-dev-shm-usage) go to TMPDIR;
		// a killed browser leaves them: under the test's own directory,
		// they go with it.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		acancel()
		t.Fatalf("chromium: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, err := range chromedp.Events(ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	t.Cleanup(func() {
		cancel()
		acancel()
		<-done
	})
	return b
}

// do runs steps with a deadline.
func (b *browser) do(t testing.TB, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression (a promise is awaited).
func eval[T any](t testing.TB, b *browser, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("browser: %s: %v", js, err)
	}
	return v
}

// waitJS polls a JavaScript condition (no sleeps: the page is asked until
// it holds or the deadline passes).
func (b *browser) waitJS(t testing.TB, d time.Duration, js string) {
	t.Helper()
	testenv.WaitFor(t, d, func() (bool, string) {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+js+")"))
		if err != nil {
			return false, err.Error()
		}
		return ok, js
	})
}

// screenshot saves the viewport to docs/screenshots/NAME.png when
// PISYNC_SCREENSHOTS=1.
func (b *browser) screenshot(t testing.TB, name string) {
	t.Helper()
	if os.Getenv("PISYNC_SCREENSHOTS") != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserListAndFilter: the list shows each session's first message
// as text (a payload in it stays inert) and a forked badge, and filters
// by project, state and text.
func TestBrowserListAndFilter(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	const payload = `<img src=x onerror=alert(1)><script>alert(2)</script>`
	firsts := []string{"hello " + payload, "fix the parser in /home/u/alpha", "hello /home/u/beta"}
	for i, cwd := range []string{"/home/u/alpha", "/home/u/alpha", "/home/u/beta"} {
		sid := fmt.Sprintf("33333333-0000-4000-8000-00000000000%d", i)
		p := filepath.Join(d.root, "--home-u-"+filepath.Base(cwd)+"--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
		hdr := testenv.HeaderAt(sid, cwd, "2026-11-29T23:08:16.463Z")
		if i == 1 { // forked from session 0
			hdr = strings.TrimSuffix(hdr, "}") + fmt.Sprintf(`,"parentSession":%q}`, strings.Replace(p, "001.jsonl", "000.jsonl", 1))
		}
		testenv.WriteFile(t, p, []byte(hdr+"\n"+
			testenv.Entry("u1", "", firsts[i])+"\n"+
			testenv.Entry("u2", "u1", "not the first")+"\n"+
			fmt.Sprintf(`{"type":"session_info","id":"n1","parentId":"u2","timestamp":"2026-11-29T23:08:18.000Z","name":"session %d <b>bold</b>"}`, i)+"\n"))
		d.waitEntries(sid, 3)
	}
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/")))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1' && document.querySelectorAll('#list .row').length === 3`)
	b.screenshot(t, "sessions")
	// the name is text, not markup
	names := eval[[]string](t, b, `[...document.querySelectorAll('#list .row .name')].map(e => e.textContent)`)
	if len(names) != 3 || !strings.Contains(strings.Join(names, "|"), "<b>bold</b>") {
		t.Errorf("names %q", names)
	}
	// the first message, as text: the payload is shown, not run
	got := eval[[]string](t, b, `[...document.querySelectorAll('#list .row .first')].map(e => e.textContent).sort()`)
	want := append([]string(nil), firsts...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("first messages %q, want %q", got, want)
	}
	if n := eval[int](t, b, `document.querySelectorAll('#list img, #list script').length + document.scripts.length - 3`); n != 0 || b.dialogs.Load() != 0 {
		t.Errorf("the first message's payload is markup: %d elements, %d dialogs", n, b.dialogs.Load())
	}
	// the forked session has the badge, and the state filter finds it alone
	forked := eval[[]string](t, b, `[...document.querySelectorAll('#list .row')].filter(r => r.querySelector('.badge.b-forked')).map(r => r.dataset.id)`)
	if len(forked) != 1 || forked[0] != "33333333-0000-4000-8000-000000000001" {
		t.Errorf("rows with a forked badge: %q", forked)
	}
	b.do(t, chromedp.SetValue(chromedp.CSS(`#f-state`), "forked"))
	eval[bool](t, b, `document.getElementById('f-state').dispatchEvent(new Event('change'))`)
	b.waitJS(t, 10*time.Second, `document.querySelectorAll('#list .row').length === 1 && document.querySelector('#list .row').dataset.id.endsWith('001')`)
	// forked is not unusual (its row is not marked so): "nothing
	// unusual" keeps it with the others
	b.do(t, chromedp.SetValue(chromedp.CSS(`#f-state`), "plain"))
	eval[bool](t, b, `document.getElementById('f-state').dispatchEvent(new Event('change'))`)
	b.waitJS(t, 10*time.Second, `document.querySelectorAll('#list .row').length === 3`)
	eval[bool](t, b, `(e => (e.value = '', e.dispatchEvent(new Event('change'))))(document.getElementById('f-state'))`)
	// the text filter reads the first message
	b.do(t, chromedp.SendKeys(chromedp.CSS(`#f-text`), "parser"))
	b.waitJS(t, 10*time.Second, `document.querySelectorAll('#list .row').length === 1 && document.querySelector('#list .row').dataset.id.endsWith('001')`)
	eval[bool](t, b, `(e => (e.value = '', e.dispatchEvent(new Event('input'))))(document.getElementById('f-text'))`)
	b.waitJS(t, 10*time.Second, `document.querySelectorAll('#list .row').length === 3`)
	// filter by project
	b.do(t, chromedp.SetValue(chromedp.CSS(`#f-project`), "/home/u/beta"))
	eval[bool](t, b, `document.getElementById('f-project').dispatchEvent(new Event('change'))`)
	b.waitJS(t, 10*time.Second, `document.querySelectorAll('#list .row').length === 1`)
	proj := eval[string](t, b, `document.querySelector('#list .row .project').textContent`)
	if proj != "/home/u/beta" {
		t.Errorf("filtered row's project %q", proj)
	}
	// text filter on top: nothing matches
	b.do(t, chromedp.SendKeys(chromedp.CSS(`#f-text`), "alpha"))
	b.waitJS(t, 10*time.Second, `document.querySelectorAll('#list .row').length === 0`)
	// search without an index says so
	b.do(t, chromedp.SendKeys(chromedp.CSS(`#q`), "hello\n"))
	b.waitJS(t, 10*time.Second, `(document.querySelector('#search-results .search-off')||{}).textContent?.includes('search is off')`)
}

func TestBrowserBranchSwitchAndContext(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	d.write(sid1,
		testenv.Header(sid1),
		testenv.Entry("u1", "", "hello **world**"),
		assistant("a1", "u1", "let me edit", "c1"),
		toolResult("r1", "a1", "c1", "edited"),
		testenv.EntryAt("u2", "u1", "2026-11-29T23:08:21.000Z", "other branch"),
		`{"type":"label","id":"l1","parentId":"u2","timestamp":"2026-11-29T23:08:22.000Z","targetId":"a1","label":"the edit"}`,
	)
	d.waitEntries(sid1, 5)
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid1)))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1'`)
	// pi's leaf is l1 (on u2's branch): a1 is not shown
	if !eval[bool](t, b, `!!document.getElementById('e-u2') && !document.getElementById('e-a1')`) {
		t.Fatal("the leaf's branch (u1, u2) is not what is shown")
	}
	b.screenshot(t, "session")
	// click a1 in the tree: its branch is shown, with the result paired
	b.do(t, chromedp.Click(chromedp.CSS(`#tree li[data-id="a1"]`)))
	b.waitJS(t, 10*time.Second, `document.getElementById('e-a1') && !document.getElementById('e-u2') && document.getElementById('e-r1')`)
	label := eval[string](t, b, `document.querySelector('#tree li[data-id="a1"] .label').textContent`)
	if label != "the edit" {
		t.Errorf("label %q", label)
	}
	b.screenshot(t, "session-branch")
	// what the model sees, at r1: the worker's context, message for message
	var want strings.Builder
	if err := d.worker.WriteContext(context.Background(), &want, sid1, "r1", d.web.opts.Rules); err != nil {
		t.Fatal(err)
	}
	b.do(t, chromedp.Click(chromedp.CSS(`#v-context`)))
	b.waitJS(t, 10*time.Second, `document.getElementById('context').dataset.messages !== undefined`)
	n := eval[int](t, b, `+document.getElementById('context').dataset.messages`)
	if wantN := strings.Count(want.String(), `"role":`); n != wantN {
		t.Errorf("context view shows %d messages, the context has %d", n, wantN)
	}
	got := eval[string](t, b, `fetch(document.getElementById('context-json').href).then(r => r.text())`)
	if got != want.String()+"\n" {
		t.Errorf("the page's context JSON differs from the worker's:\n%s\nwant\n%s", got, want.String())
	}
	b.screenshot(t, "session-context")
}

func TestBrowserXSSInert(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	const sid = "22222222-0000-4000-8000-000000000002"
	lines := xssSession(sid)
	d.write(sid, lines...)
	d.waitEntries(sid, len(lines)-1)
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid)))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1'`)
	// Open every fold, then look: the payloads are text, none is markup.
	eval[bool](t, b, `document.querySelectorAll('details').forEach(d => d.open = true) || true`)
	type result struct {
		Scripts, Imgs, Iframes int
		JSLinks                int
		Text                   string
	}
	res := eval[result](t, b, `({
		Scripts: document.scripts.length,
		Imgs: document.querySelectorAll('img:not([src^="/api/"])').length,
		Iframes: document.querySelectorAll('iframe,object,embed').length,
		JSLinks: [...document.querySelectorAll('a[href]')].filter(a => !/^(https?:|mailto:|\/|#|$)/i.test(a.getAttribute('href'))).length,
		Text: document.getElementById('entries').textContent,
	})`)
	if res.Scripts != 2 || res.Imgs != 0 || res.Iframes != 0 || res.JSLinks != 0 {
		t.Errorf("active content in the page: %+v", res)
	}
	for _, p := range []string{`<img src=x onerror=alert(1)>`, `<script>alert(2)</script>`} {
		if !strings.Contains(res.Text, p) {
			t.Errorf("payload %q is not shown as text", p)
		}
	}
	tree := eval[string](t, b, `document.getElementById('tree').textContent`)
	if !strings.Contains(tree, "<img src=x onerror=alert(9)>") {
		t.Errorf("the label payload is not shown as text in the tree: %q", tree)
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened: a payload ran", n)
	}
	b.screenshot(t, "xss")
}
