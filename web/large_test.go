package web

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// bigSession is a session of n entries: user questions and assistant
// answers with markdown, code and a tool call each tenth turn.
func bigSession(sid string, n int) []string {
	lines := []string{testenv.Header(sid)}
	parent := ""
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%08x", i+1)
		var l string
		if i%2 == 0 {
			l = testenv.EntryAt(id, parent, "2026-11-29T23:08:17.000Z", fmt.Sprintf("question %d: how do I *do* thing %d?", i, i))
		} else {
			l = fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"assistant","content":[{"type":"text","text":"answer %d\n\n`+"```go\\nfunc f() int { return %d }\\n```"+`\n\n- one\n- two"}],"provider":"p","model":"m","usage":{"totalTokens":10,"cost":{"total":0.001}},"timestamp":2}}`, id, parent, i, i)
		}
		lines = append(lines, l)
		parent = id
	}
	return lines
}

// noisePNG is a PNG of w×h random pixels (it does not compress).
func noisePNG(t testing.TB, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.NRGBA{uint8(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32()), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func imageEntry(id, parent string, data []byte) string {
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","mimeType":"image/png","data":%q}],"timestamp":1}}`,
		id, parent, base64.StdEncoding.EncodeToString(data))
}

// TestBrowserLargeSession renders a 10k-entry session and logs how long
// the server and the page took (docs/PERFORMANCE.md; no assertion on
// time).
func TestBrowserLargeSession(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	const sid = "44444444-0000-4000-8000-000000000004"
	const n = 10000
	d.write(sid, bigSession(sid, n)...)
	d.waitEntries(sid, n)
	// Drawn twice: first with nothing kept (the renderer starting, the
	// session read from the streams), then a reload (the snapshot kept:
	// cache.go); then the answer alone, from the kept snapshot.
	var drawn [2]float64
	for i := range drawn {
		b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid)))
		b.waitJS(t, 3*time.Minute, `document.body.dataset.ready === '1'`)
		drawn[i] = eval[float64](t, b, `performance.getEntriesByName('pisync-session-drawn')[0].startTime`)
		t.Logf("visit %d: %s", i+1, eval[string](t, b, pageTimings))
	}
	start := time.Now()
	resp, body := d.get("/api/s/" + sid)
	server := time.Since(start)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := eval[int](t, b, `document.querySelectorAll('#entries article.entry').length`); got != pageEntries {
		t.Errorf("%d entries rendered first, want the last %d", got, pageEntries)
	}
	if !eval[bool](t, b, fmt.Sprintf(`!!document.getElementById('e-%08x')`, n)) {
		t.Error("the last entry is not shown")
	}
	b.do(t, chromedp.Click(chromedp.CSS(`#earlier`)))
	b.waitJS(t, 3*time.Minute, fmt.Sprintf(`document.querySelectorAll('#entries article.entry').length === %d`, 2*pageEntries))
	if got := eval[int](t, b, `+document.getElementById('tree').dataset.rows`); got != n {
		t.Errorf("%d tree rows, want %d", got, n)
	}
	if got := eval[int](t, b, `document.querySelectorAll('#tree li').length`); got > 200 {
		t.Errorf("%d tree rows in the DOM: only those in view should be", got)
	}
	// still responsive: a branch switch (to the middle) answers; the
	// tree panel is scrolled to that row first (as a user would)
	eval[bool](t, b, `(() => {
		const tree = document.getElementById('tree'), side = tree.closest('.side');
		side.scrollTop = tree.offsetTop + 4999 * +tree.dataset.rowHeight - 100;
		return true;
	})()`)
	b.waitJS(t, 10*time.Second, `!!document.querySelector('#tree li[data-id="00001388"]')`)
	b.do(t, chromedp.Click(chromedp.CSS(`#tree li[data-id="00001388"]`)))
	b.waitJS(t, 3*time.Minute, `document.body.dataset.selected === '00001388' && !!document.getElementById('e-00001388')`)
	t.Logf("10k-entry session: page drawn %.0f ms (first visit, nothing kept) and %.0f ms (reload) after navigation start; /api/s from the kept snapshot %v (%d KiB)", drawn[0], drawn[1], server, len(body)>>10)

	// A deep link to an entry outside the last window: its header shows,
	// below the sticky view switch (it landed under it: a web probe,
	// 2026-12-07).
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid)+"#e-00000064"))
	b.waitJS(t, 3*time.Minute, `document.body.dataset.ready === '1' && !!document.getElementById('e-00000064')?.classList.contains('target')`)
	b.waitJS(t, 10*time.Second, `(() => {
		const h = document.querySelector('#e-00000064 > header'), r = h.getBoundingClientRect();
		return r.top >= 0 && h.contains(document.elementFromPoint(r.left + 8, r.top + r.height / 2));
	})()`)

	// What the model sees shows its own "earlier" button, not the
	// history's, which loaded entries into the hidden history pane and
	// changed nothing shown (a web probe, 2026-12-07).
	b.do(t, chromedp.Click(chromedp.CSS(`#v-context`)))
	b.waitJS(t, time.Minute, `!!document.getElementById('ctx-earlier') && !document.getElementById('context').hidden`)
	if eval[bool](t, b, `!document.getElementById('earlier').hidden || !document.getElementById('later').hidden`) {
		t.Error("the history's buttons show in what the model sees")
	}
	b.do(t, chromedp.Click(chromedp.CSS(`#v-history`)))
	b.waitJS(t, 10*time.Second, `!document.getElementById('earlier').hidden`)
}

// pageTimings is where a page's time went, from its performance entries:
// each request's start, first byte and end (ms after navigation start) with
// the server's parts (Server-Timing), and the page's marks.
const pageTimings = `(() => {
	const f = x => Math.round(x);
	const out = [];
	const nav = performance.getEntriesByType('navigation')[0];
	out.push('html ' + f(nav.requestStart) + '/' + f(nav.responseStart) + '/' + f(nav.responseEnd));
	for (const r of performance.getEntriesByType('resource')) {
		const st = (r.serverTiming || []).map(x => x.name + '=' + x.duration).join(' ');
		out.push(new URL(r.name).pathname.split('/').slice(-2).join('/') + ' ' + f(r.startTime) + '/' + f(r.connectStart) + '/' + f(r.requestStart) + '/' + f(r.responseStart) + '/' + f(r.responseEnd) + (st ? ' [' + st + ']' : '') + ' ' + (r.encodedBodySize >> 10) + 'KiB');
	}
	for (const m of performance.getEntriesByType('mark')) out.push(m.name + ' ' + f(m.startTime));
	return out.join('; ');
})()`

// TestBrowserLargeImages: images come by URL, lazily, size-capped; one
// over the cap is a note, not a download.
func TestBrowserLargeImages(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	const sid = "55555555-0000-4000-8000-000000000005"
	big := noisePNG(t, 1400, 1000) // ~4 MiB, ~5.5 MiB as base64
	huge := make([]byte, maxImageB64/4*3+1024)
	lines := []string{testenv.Header(sid), testenv.Entry("u0", "", "images follow")}
	parent := "u0"
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("i%d", i)
		lines = append(lines, imageEntry(id, parent, big))
		parent = id
	}
	lines = append(lines, imageEntry("i4", parent, huge))
	d.write(sid, lines...)
	d.waitEntries(sid, 5)
	resp, body := d.get("/api/s/" + sid)
	if resp.StatusCode != 200 || len(body) > 64<<10 {
		t.Fatalf("the page data is %d bytes (status %d): images must come by URL", len(body), resp.StatusCode)
	}
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/s/"+sid)))
	b.waitJS(t, 3*time.Minute, `document.body.dataset.ready === '1'`)
	if n := eval[int](t, b, `document.querySelectorAll('#entries img[loading="lazy"]').length`); n != 3 {
		t.Errorf("%d lazy images, want 3", n)
	}
	if !strings.Contains(eval[string](t, b, `document.getElementById('e-i4').textContent`), "not shown: over") {
		t.Error("the image over the cap is not replaced by a note")
	}
	// each loads when scrolled to, no larger on screen than the cap
	for i := 1; i <= 3; i++ {
		eval[bool](t, b, fmt.Sprintf(`(() => { document.querySelector('#e-i%d img').scrollIntoView(); return true })()`, i))
		b.waitJS(t, 3*time.Minute, fmt.Sprintf(`document.querySelector('#e-i%d img').complete && document.querySelector('#e-i%d img').naturalWidth === 1400`, i, i))
	}
	if h := eval[float64](t, b, `document.querySelector('#e-i1 img').getBoundingClientRect().height`); h > 480 {
		t.Errorf("image shown %v px high, over the 480 px cap", h)
	}
	// the image endpoint serves the bytes with their type
	r, err := viewClient.Get(d.http.URL + "/api/s/" + sid + "/image/i1/0")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.Header.Get("Content-Type") != "image/png" || !bytes.Equal(got, big) {
		t.Errorf("image endpoint: %s, %d bytes", r.Header.Get("Content-Type"), len(got))
	}
}
