package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestSessionsListAnswer: the list's rows carry the first message and the
// forked state; ?limit=N is the newest N of the same order, with the
// total; the session page names the parent file.
func TestSessionsListAnswer(t *testing.T) {
	d := startDaemon(t)
	var sids []string
	firsts := []string{"question 0", `</script><script>alert(1)</script><!-- question 1`, "question 2"}
	for i := 0; i < 3; i++ {
		sid := fmt.Sprintf("55555555-0000-4000-8000-00000000000%d", i)
		hdr := testenv.HeaderAt(sid, "/home/u/p", fmt.Sprintf("2026-11-29T23:08:1%d.000Z", i))
		if i == 2 {
			hdr = strings.TrimSuffix(hdr, "}") + `,"parentSession":"/home/u/.pi/agent/sessions/--home-u-p--/old.jsonl"}`
		}
		d.write(sid, hdr, testenv.EntryAt("u1", "", fmt.Sprintf("2026-11-29T23:09:1%d.000Z", i), firsts[i]))
		d.waitEntries(sid, 1)
		sids = append(sids, sid)
	}
	type answer struct {
		Total    int       `json:"total"`
		Sessions []listRow `json:"sessions"`
	}
	get := func(path string) answer {
		t.Helper()
		resp, body := d.get(path)
		var a answer
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &a) != nil {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		return a
	}
	all := get("/api/sessions")
	if all.Total != 3 || len(all.Sessions) != 3 {
		t.Fatalf("whole list: %+v", all)
	}
	for i, r := range all.Sessions { // newest first
		k := 2 - i
		if r.ID != sids[k] || r.First != firsts[k] || (k == 2) != (strings.Join(r.State, ",") == "forked") {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	head := get("/api/sessions?limit=2")
	if head.Total != 3 || len(head.Sessions) != 2 || head.Sessions[0].ID != sids[2] || head.Sessions[1].ID != sids[1] {
		t.Errorf("limit 2: %+v", head)
	}
	if a := get("/api/sessions?limit=0"); a.Total != 3 || len(a.Sessions) != 0 {
		t.Errorf("limit 0: %+v", a)
	}
	if a := get("/api/sessions?limit=x"); len(a.Sessions) != 3 {
		t.Errorf("a limit that is no number is none: %+v", a)
	}
	// The page carries the newest rows in a data block that no first
	// message can close.
	_, page := d.get("/")
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var scripts []*html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.Data == "script" {
			scripts = append(scripts, n)
		}
	}
	if len(scripts) != 3 || scripts[2].FirstChild == nil {
		t.Fatalf("%d scripts in the page:\n%s", len(scripts), page)
	}
	var inline answer
	if err := json.Unmarshal([]byte(scripts[2].FirstChild.Data), &inline); err != nil || inline.Total != 3 || len(inline.Sessions) != 3 ||
		inline.Sessions[1].First != firsts[1] {
		t.Errorf("the page's rows: %+v (%v)", inline, err)
	}
	_, body := d.get("/api/s/" + sids[2])
	var v sessionView
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Parent != "/home/u/.pi/agent/sessions/--home-u-p--/old.jsonl" {
		t.Errorf("session page's parent %q (%v)", v.Parent, err)
	}
}

// TestBrowserListFollowsChanges: an open list shows a session written
// meanwhile with its new count, and a new session, by asking for those
// sessions alone (?id=), not the whole list at every change; an answer
// whose total does not add up brings the whole list.
func TestBrowserListFollowsChanges(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t)
	const s1, s2 = "33333333-0000-4000-8000-0000000000a1", "33333333-0000-4000-8000-0000000000a2"
	p1 := d.write(s1, testenv.Header(s1), testenv.Entry("u1", "", "one"))
	d.waitEntries(s1, 1)
	b.do(t, chromedp.Navigate(viewLink(d.http.URL+"/")))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1' && document.getElementById('live').className === 'live on' && document.querySelectorAll('#list .row').length === 1`)
	wholeBefore := eval[int](t, b, `performance.getEntriesByType('resource').filter(e => /\/api\/sessions$/.test(e.name)).length`)

	testenv.AppendFile(t, p1, testenv.Entry("u2", "u1", "two")+"\n")
	b.waitJS(t, 20*time.Second, `(document.querySelector('#list .row[data-id="`+s1+`"] .num') || {}).textContent === '2'`)
	d.write(s2, testenv.Header(s2), testenv.Entry("v1", "", "new session"))
	b.waitJS(t, 20*time.Second, `document.querySelectorAll('#list .row').length === 2`)

	byID := eval[int](t, b, `performance.getEntriesByType('resource').filter(e => /\/api\/sessions\?id=/.test(e.name)).length`)
	whole := eval[int](t, b, `performance.getEntriesByType('resource').filter(e => /\/api\/sessions$/.test(e.name)).length`)
	if byID == 0 || whole != wholeBefore {
		t.Errorf("answers asked for by id: %d; whole lists: %d after the first %d (want none more)", byID, whole, wholeBefore)
	}

	// The answer by id: those sessions, with the whole list's total.
	_, body := d.get("/api/sessions?id=" + s2 + "&id=nope")
	var ans listAnswer
	if err := json.Unmarshal([]byte(body), &ans); err != nil || ans.Total != 2 || len(ans.Sessions) != 1 || ans.Sessions[0].ID != s2 {
		t.Errorf("by id: %s (%v)", body, err)
	}
}
