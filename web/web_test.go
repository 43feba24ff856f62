package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

const sid1 = "11111111-0000-4000-8000-000000000001"

// assistant is an assistant entry with a text block and one tool call.
func assistant(id, parent, text, call string) string {
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":%q},{"type":"toolCall","id":%q,"name":"edit","arguments":{"path":"a.go","oldText":"x := 1","newText":"x := 2"}}],"provider":"anthropic","model":"claude-x","usage":{"totalTokens":120,"cost":{"total":0.5}},"stopReason":"toolUse","timestamp":2}}`, id, parent, text, call)
}

func toolResult(id, parent, call, text string) string {
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-11-29T23:08:19.000Z","message":{"role":"toolResult","toolCallId":%q,"toolName":"edit","content":[{"type":"text","text":%q}],"isError":false,"timestamp":3}}`, id, parent, call, text)
}

func TestSecurityHeadersHostAndToken(t *testing.T) {
	d := startDaemon(t)
	for _, path := range []string{"/", "/s/" + sid1, "/assets/list.js", "/api/sessions", "/nope"} {
		resp, _ := d.get(path)
		if got := resp.Header.Get("Content-Security-Policy"); got != csp {
			t.Errorf("%s: CSP %q", path, got)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
	}
	for host, want := range map[string]int{
		"localhost:1": 200, "127.0.0.1": 200, "[::1]:9": 200, "app.localhost": 200,
		"evil.example": http.StatusMisdirectedRequest, "127.0.0.1.evil.example:80": http.StatusMisdirectedRequest,
	} {
		req, _ := http.NewRequest("GET", d.http.URL+"/api/sessions", nil)
		req.Host = host
		resp, err := viewClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: status %d, want %d", host, resp.StatusCode, want)
		}
	}
	// A POST needs the header, not only the cookie a browser sends along
	// (a cross-site form can send a POST, and at times the cookie too).
	port := d.http.URL[strings.LastIndex(d.http.URL, ":")+1:]
	for _, tok := range []string{"", "wrong", d.web.Token()} {
		req, _ := http.NewRequest("POST", d.http.URL+"/api/sessions", strings.NewReader("x"))
		req.AddCookie(&http.Cookie{Name: "pisync_token_" + port, Value: cookieValue(testToken)})
		if tok != "" {
			req.Header.Set(TokenHeader, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusForbidden
		if tok == d.web.Token() {
			want = http.StatusMethodNotAllowed // no endpoint changes state
		}
		if resp.StatusCode != want {
			t.Errorf("POST with token %q: status %d, want %d", tok, resp.StatusCode, want)
		}
	}
	if resp, body := d.get("/api/search?q=x"); resp.StatusCode != 503 || !strings.Contains(body, "search is off") {
		t.Errorf("search without index: %d %q", resp.StatusCode, body)
	}
}

// TestTokenIsNeeded: the view answers nobody without the daemon's token
// (another user of the machine reaches the loopback port too): not a page,
// an API answer, an event stream or an asset. A program presents it in a
// header; a browser opens the link once, gets a cookie for this daemon's
// port and is sent on without the token in the address. (Before, any
// local user could read every session.)
func TestTokenIsNeeded(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "secret words"))
	d.waitEntries(sid1, 1)
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(path string, h map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", d.http.URL+path, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == 200 && strings.HasPrefix(path, "/api/events") {
			return resp, "" // a stream: it does not end
		}
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	paths := []string{"/", "/s/" + sid1, "/api/sessions", "/api/s/" + sid1, "/api/s/" + sid1 + "/context", "/api/events?format=ndjson&after=PI_LOCAL:0", "/api/search?q=secret", "/assets/list.js"}
	for _, p := range paths {
		for _, h := range []map[string]string{nil, {TokenHeader: "wrong"}, {"Authorization": "Bearer wrong"}, {"Cookie": "pisync_token=" + testToken}} {
			resp, body := do(p, h)
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "secret") || !strings.Contains(body, "pisyncd web") || !resp.Close {
				t.Errorf("%s with %v: %d %.100q (connection closed: %v), want 401 saying where the link is, and the connection closed", p, h, resp.StatusCode, body, resp.Close)
			}
		}
	}
	// A program: the header, or a bearer token.
	for _, h := range []map[string]string{{TokenHeader: testToken}, {"Authorization": "Bearer " + testToken}, {"Authorization": "bearer " + testToken}, {"Authorization": "BEARER " + testToken}} {
		if resp, body := do("/api/s/"+sid1+"/context", h); resp.StatusCode != 200 || !strings.Contains(body, "secret words") {
			t.Errorf("with %v: %d %.100q", h, resp.StatusCode, body)
		}
	}
	// A browser: the link sets the cookie of this port and sends it on.
	resp, _ := do("/s/"+sid1+"?leaf=u1&"+TokenParam+"="+testToken, nil)
	port := d.http.URL[strings.LastIndex(d.http.URL, ":")+1:]
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "pisync_token_"+port {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/s/"+sid1+"?leaf=u1" || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode {
		t.Fatalf("the link: %d, Location %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	for _, p := range paths {
		if resp, _ := do(p, map[string]string{"Cookie": cookie.Name + "=" + cookie.Value}); resp.StatusCode == http.StatusUnauthorized {
			t.Errorf("%s with the cookie: 401", p)
		}
	}
	// A decoy of the same name, which a server of another user on another
	// port of this host can set for a longer path (sent first), does not
	// hide the real cookie.
	decoy := cookie.Name + "=decoy; " + cookie.Name + "=" + cookie.Value
	if resp, _ := do("/api/s/"+sid1, map[string]string{"Cookie": decoy}); resp.StatusCode != http.StatusOK {
		t.Errorf("the cookie after a decoy of its name: %d", resp.StatusCode)
	}
	if resp, _ := do("/api/s/"+sid1, map[string]string{"Cookie": cookie.Name + "=decoy"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a decoy alone: %d", resp.StatusCode)
	}
	// The link sends the browser on within this view, whatever its path:
	// "//host/" would be another site's address in a Location.
	// An escaped slash stays escaped (a session id "a/b").
	for p, want := range map[string]string{"//evil.example/": "/evil.example", "/\\evil.example/x": "/%5Cevil.example/x", "/s/a/../b/": "/s/b",
		"/s/a%2Fb": "/s/a%2Fb", "/%2F/evil.example": "/%2F/evil.example"} {
		resp, _ := do(p+"?"+TokenParam+"="+testToken, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("the link at %q: %d, Location %q, want %q", p, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	if resp, _ := do("/?"+TokenParam+"=wrong", nil); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("a link with a wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
}

// xssLines are entries that try to run script in the page.
var xssPayloads = []string{
	`<img src=x onerror=alert(1)>`,
	`<script>alert(2)</script>`,
	`[click](javascript:alert(3))`,
	`<a href="javascript:alert(4)">x</a>`,
	`![i](data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=)`,
	"```\n</pre><script>alert(5)</script>\n```",
	// a markdown image of any other path on this server (its context, a
	// big session's page) makes each viewer's browser fetch it
	`![c](/api/s/x/context?x=1) ![s](/s/x) ![q](/api/s/x/image/e/0?x=1) ![d](/api/s/x/image/../context)`,
	// character references decoded after the scheme was checked
	`[vs](vscode&#58;//evil/x) [r](&#x2f;&#x2f;evil.example/x)`,
	`![e](https&#58;//evil.example/x.png) ![r](&#x2f;&#x2f;evil.example/x.png)`,
	"[j](javascript&colon;alert(11)) [t](java&#9;script:alert(12))\n\n[ref]\n\n[ref]: vscode&#x3a;//evil/ref",
}

func xssSession(sid string) []string {
	lines := []string{testenv.Header(sid)}
	parent := ""
	for i, p := range xssPayloads {
		id := fmt.Sprintf("x%07d", i)
		lines = append(lines, testenv.Entry(id, parent, p))
		parent = id
	}
	// the payload in an id, a label, a tool name and a model name too
	lines = append(lines,
		fmt.Sprintf(`{"type":"message","id":"a1","parentId":%q,"timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"<img src=x onerror=alert(6)>","arguments":{"q":"<script>alert(7)</script>"}}],"model":"<script>alert(8)</script>","usage":{"totalTokens":1}}}`, parent),
		`{"type":"label","id":"l1","parentId":"a1","timestamp":"2026-11-29T23:08:19.000Z","targetId":"a1","label":"<img src=x onerror=alert(9)>"}`,
		`{"type":"message","id":"\"><img src=x onerror=alert(10)>","parentId":"l1","timestamp":"2026-11-29T23:08:20.000Z","message":{"role":"user","content":"id attack"}}`,
	)
	return lines
}

func TestXSSIsInert(t *testing.T) {
	d := startDaemon(t)
	const sid = "22222222-0000-4000-8000-000000000002"
	lines := xssSession(sid)
	d.write(sid, lines...)
	d.waitEntries(sid, len(lines)-1)
	resp, body := d.get("/api/s/" + sid)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var v sessionView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	checkInert(t, v.HTML)
	if !strings.Contains(v.HTML, "&lt;script&gt;alert(2)&lt;/script&gt;") && !strings.Contains(v.HTML, "&lt;script&gt;") {
		t.Errorf("the script payload is not shown as text")
	}
	resp, body = d.get("/api/s/" + sid + "/tree")
	var tv treeView
	if err := json.Unmarshal([]byte(body), &tv); err != nil || resp.StatusCode != 200 {
		t.Fatalf("tree: status %d, %v", resp.StatusCode, err)
	}
	if len(tv.Tree) != len(lines)-1 {
		t.Errorf("tree has %d rows, want %d", len(tv.Tree), len(lines)-1)
	}
}

func TestSessionPageData(t *testing.T) {
	d := startDaemon(t)
	// a branch: u1 → a1 (call c1) → r1 ; u1 → u2 (a second branch)
	path := d.write(sid1,
		testenv.Header(sid1),
		testenv.Entry("u1", "", "hello **world**"),
		assistant("a1", "u1", "let me edit", "c1"),
		toolResult("r1", "a1", "c1", "edited"),
		testenv.EntryAt("u2", "u1", "2026-11-29T23:08:21.000Z", "other branch"),
	)
	d.waitEntries(sid1, 4)
	_, body := d.get("/api/s/" + sid1)
	var v sessionView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Leaf != "u2" || v.Selected != "u2" {
		t.Errorf("leaf %q selected %q, want u2", v.Leaf, v.Selected)
	}
	if v.Resume != "pi --session "+path {
		t.Errorf("resume %q, want pi --session %s", v.Resume, path)
	}
	if !strings.Contains(v.HTML, "<strong>world</strong>") || strings.Contains(v.HTML, "let me edit") {
		t.Errorf("u2's branch rendered wrong: %s", v.HTML)
	}
	var b struct{ HTML string }
	_, body = d.get("/api/s/" + sid1 + "/branch?leaf=r1")
	json.Unmarshal([]byte(body), &b)
	for _, want := range []string{`id="e-a1"`, `id="e-r1"`, `class="paired"`, `<span class="del">- x := 1</span>`, `<span class="add">+ x := 2</span>`, `<details class="thinking">`} {
		if !strings.Contains(b.HTML, want) {
			t.Errorf("branch r1 lacks %s:\n%s", want, b.HTML)
		}
	}
	if strings.Count(b.HTML, `<article`) != 2 {
		t.Errorf("branch r1: want 2 articles (u1, a1 with r1 paired), got %d", strings.Count(b.HTML, "<article"))
	}
	var tv treeView
	_, body = d.get("/api/s/" + sid1 + "/tree")
	json.Unmarshal([]byte(body), &tv)
	if tv.Leaf != "u2" || len(tv.Tree) != 4 || tv.Pos != v.Pos {
		t.Errorf("tree: leaf %q, %d rows, pos %q (the page's %q)", tv.Leaf, len(tv.Tree), tv.Pos, v.Pos)
	}
	if len(tv.Usage) != 1 || tv.Usage[0].Model != "anthropic/claude-x" || tv.Usage[0].Tokens != 120 || tv.Usage[0].Cost != 0.5 {
		t.Errorf("usage %+v", tv.Usage)
	}
	// the context equals the worker's (what `pisyncd context --json` prints)
	var want strings.Builder
	if err := d.worker.WriteContext(context.Background(), &want, sid1, "r1", d.web.opts.Rules); err != nil {
		t.Fatal(err)
	}
	if _, got := d.get("/api/s/" + sid1 + "/context?leaf=r1"); got != want.String()+"\n" {
		t.Errorf("context:\n%s\nwant\n%s", got, want.String())
	}
}

// readEvents reads n NDJSON events (skipping pings and the ready line).
func readEvents(t *testing.T, sc *bufio.Scanner, n int) []event {
	t.Helper()
	var out []event
	for len(out) < n && sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if e.ID == "" {
			continue
		}
		out = append(out, e)
	}
	if len(out) < n {
		t.Fatalf("stream ended after %d of %d events: %v", len(out), n, sc.Err())
	}
	return out
}

func TestEventsResumeWithoutLossOrDuplicates(t *testing.T) {
	d := startDaemon(t)
	path := d.write(sid1, testenv.Header(sid1), testenv.Entry("e0", "", "first"))
	d.waitEntries(sid1, 1)
	_, body := d.get("/api/s/" + sid1)
	var v sessionView
	json.Unmarshal([]byte(body), &v)

	open := func(after string) (*http.Response, *bufio.Scanner) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", d.http.URL+"/api/events?format=ndjson&session="+sid1+"&after="+after, nil)
		resp, err := viewClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("events: %d", resp.StatusCode)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 4<<20)
		return resp, sc
	}
	resp, sc := open(v.Pos)
	parent := "e0"
	appendN := func(from, n int) {
		for i := from; i < from+n; i++ {
			id := fmt.Sprintf("e%d", i)
			testenv.AppendFile(t, path, testenv.Entry(id, parent, "line "+id)+"\n")
			parent = id
		}
	}
	appendN(1, 5)
	got := readEvents(t, sc, 3)
	resp.Body.Close() // the client goes away after 3 of 5
	last := got[len(got)-1].Pos
	appendN(6, 5) // written while no one listens
	_, sc = open(last)
	got = append(got, readEvents(t, sc, 7)...)
	for i, e := range got {
		if want := fmt.Sprintf("e%d", i+1); e.ID != want {
			t.Fatalf("event %d is %s, want %s (all: %v)", i, e.ID, want, ids(got))
		}
	}
	// and a Last-Event-ID header resumes like ?after=
	req, _ := http.NewRequest("GET", d.http.URL+"/api/events?format=ndjson&session="+sid1, nil)
	req.Header.Set("Last-Event-ID", got[8].Pos)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := viewClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc = bufio.NewScanner(resp.Body)
	if e := readEvents(t, sc, 1); e[0].ID != "e10" {
		t.Errorf("after Last-Event-ID of e9: %s", e[0].ID)
	}
}

// checkInert fails when markup (parsed as a browser tokenizes it) holds
// a script or another active element, an event handler attribute, or a
// link or image to a dangerous scheme.
func checkInert(t *testing.T, markup string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(markup))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "script", "iframe", "object", "embed", "svg", "form", "base", "meta", "link", "style", "math":
			t.Errorf("active element <%s> in the markup", tok.Data)
		}
		for _, a := range tok.Attr {
			v := strings.ToLower(strings.TrimSpace(a.Val))
			switch {
			case strings.HasPrefix(a.Key, "on"):
				t.Errorf("<%s %s=%q>: event handler", tok.Data, a.Key, a.Val)
			case a.Key == "style":
				t.Errorf("<%s style=%q>: inline style", tok.Data, a.Val)
			case (a.Key == "href" || a.Key == "src") && (strings.HasPrefix(v, "javascript:") || strings.HasPrefix(v, "vbscript:") || strings.HasPrefix(v, "data:")):
				t.Errorf("<%s %s=%q>: dangerous URL", tok.Data, a.Key, a.Val)
			case a.Key == "src" && !imageSrc.MatchString(v):
				t.Errorf("<%s src=%q>: not an image of this view", tok.Data, a.Val)
			case a.Key == "href" && !safeHref(v):
				t.Errorf("<%s href=%q>: not http, https, mailto or this server", tok.Data, a.Val)
			}
		}
	}
}

// imageSrc is the one form an img src may take: an image of an entry,
// as the view's image endpoint serves it.
var imageSrc = regexp.MustCompile(`^/api/s/[^/?#\\]+/image/[^/?#\\]+/[0-9]+$`)

// safeHref reports whether a link target (as the browser reads it, its
// character references decoded) is http, https, mailto, or a path on
// this server.
func safeHref(v string) bool {
	v = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1 // a browser drops them from a URL
		}
		return r
	}, v)
	if strings.HasPrefix(v, "//") || strings.HasPrefix(v, `\`) || strings.HasPrefix(v, `/\`) {
		return false
	}
	if m := urlScheme.FindStringSubmatch(v); m != nil {
		switch m[1] {
		case "http", "https", "mailto":
			return true
		}
		return false
	}
	return true // no scheme: a path on this server
}

var urlScheme = regexp.MustCompile(`^([a-z][a-z0-9+.-]*):`)

func ids(es []event) []string {
	var s []string
	for _, e := range es {
		s = append(s, e.ID)
	}
	return s
}

// TestSessionTextNotCached: every answer that carries a session's text (an
// image, the list page with its first messages, the context JSON, the
// session's data) is served no-store, so that once a session is erased no
// copy of it stays in a browser's disk cache.
func TestSessionTextNotCached(t *testing.T) {
	d := startDaemon(t)
	const sid = "22222222-0000-4000-8000-000000000005"
	d.write(sid, testenv.Header(sid), imageEntry("i1", "", []byte("\x89PNG not really")), testenv.Entry("u2", "i1", "a secret"))
	d.waitEntries(sid, 2)
	resp, body := d.get("/api/s/" + sid + "/image/i1/0")
	if resp.StatusCode != 200 || body != "\x89PNG not really" {
		t.Fatalf("image: status %d, %q", resp.StatusCode, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("image served with Cache-Control %q, want no-store", cc)
	}
	for _, path := range []string{"/", "/api/sessions", "/api/s/" + sid, "/api/s/" + sid + "/tree",
		"/api/s/" + sid + "/context", "/api/s/" + sid + "/context/view"} {
		resp, body := d.get(path)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d, %q", path, resp.StatusCode, body)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("%s served with Cache-Control %q, want no-store", path, cc)
		}
	}
}
