package search

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

func openTest(t *testing.T, dir string) *Index {
	t.Helper()
	ix, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func testDocs() []Doc {
	return []Doc{
		{SessionID: "s1", Node: "n1", EntryID: "a", Type: "message", Role: "user", Timestamp: "2026-01-01T00:00:00Z", Text: "Please fix the frobnicator in main.go"},
		{SessionID: "s1", Node: "n1", EntryID: "b", Type: "message", Role: "assistant", Text: "The frobnicator is fixed; ran go test ./..."},
		{SessionID: "s2", Node: "n2", EntryID: "c", Type: "message", Role: "bashExecution", Text: "grep -rn frobnicator .\nmain.go:3: frobnicator()"},
		{SessionID: "s2", Node: "n2", EntryID: "d", Type: "label", Text: "checkpoint before the rewrite"},
		{SessionID: "s3", Node: "n1", EntryID: "e", Type: "message", Role: "user", Text: "日本語のテキスト 🎉 frobnicator émoji"},
	}
}

func find(t *testing.T, ix *Index, q string) Result {
	t.Helper()
	pq, err := ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ix.Search(context.Background(), pq, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ids(r Result) string {
	var s []string
	for _, h := range r.Hits {
		s = append(s, h.SessionID+"/"+h.EntryID)
	}
	return strings.Join(s, " ")
}

func TestIndexSearch(t *testing.T) {
	ix := openTest(t, filepath.Join(t.TempDir(), "search"))
	if err := ix.Write(testDocs(), "PI_LOCAL", 5); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ q, want string }{
		{"frobnicator", "s1/a s1/b s2/c s3/e"},
		{"FROBNICATOR main.go", "s1/a s2/c"},
		{`"fix the frobnicator"`, "s1/a"},
		{`"the fix frobnicator"`, ""},
		{"frobnicator -fixed -grep", "s1/a s3/e"},
		{"frobnicator node:n2", "s2/c"},
		{"session:s1 role:assistant", "s1/b"},
		{"type:label", "s2/d"},
		{"テキスト", "s3/e"},
		{"nothere", ""},
	} {
		r := find(t, ix, tc.q)
		got := strings.Fields(ids(r))
		want := strings.Fields(tc.want)
		if strings.Join(sorted(got), " ") != strings.Join(sorted(want), " ") || r.Total != uint64(len(want)) {
			t.Errorf("%q: hits %v (total %d), want %v", tc.q, got, r.Total, want)
		}
	}
	// Snippets: plain text, highlights in UTF-16 units over it.
	r := find(t, ix, "frobnicator émoji")
	if len(r.Hits) != 1 {
		t.Fatalf("hits %v", ids(r))
	}
	hit := r.Hits[0]
	u := utf16.Encode([]rune(hit.Snippet))
	var marked []string
	for _, h := range hit.Highlights {
		marked = append(marked, string(utf16.Decode(u[h[0]:h[1]])))
	}
	if strings.Join(marked, ",") != "frobnicator,émoji" {
		t.Errorf("highlighted %q in %q", marked, hit.Snippet)
	}
	if pos, err := ix.Position("PI_LOCAL"); err != nil || pos != 5 {
		t.Errorf("position %d, %v", pos, err)
	}
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestSnippetLongText(t *testing.T) {
	text := strings.Repeat("lorem ipsum ", 200) + "needle" + strings.Repeat(" dolor", 200)
	ix := openTest(t, filepath.Join(t.TempDir(), "search"))
	if err := ix.Write([]Doc{{SessionID: "s", EntryID: "x", Type: "message", Text: text}}, "PI_LOCAL", 1); err != nil {
		t.Fatal(err)
	}
	r := find(t, ix, "needle")
	hit := r.Hits[0]
	if !strings.HasPrefix(hit.Snippet, "…") || !strings.HasSuffix(hit.Snippet, "…") || len(hit.Snippet) > snippetBytes+8 || len(hit.Highlights) != 1 {
		t.Fatalf("snippet %q %v", hit.Snippet, hit.Highlights)
	}
	h := hit.Highlights[0]
	u := utf16.Encode([]rune(hit.Snippet))
	if got := string(utf16.Decode(u[h[0]:h[1]])); got != "needle" {
		t.Errorf("highlight %v over %q: %q", h, hit.Snippet, got)
	}
}

func TestEraseSessionAndReplace(t *testing.T) {
	ix := openTest(t, filepath.Join(t.TempDir(), "search"))
	if err := ix.Write(testDocs(), "PI_LOCAL", 5); err != nil {
		t.Fatal(err)
	}
	// A later line with the same entry id replaces the document.
	if err := ix.Write([]Doc{{SessionID: "s1", Node: "n1", EntryID: "a", Type: "message", Text: "rewritten"}}, "PI_LOCAL", 6); err != nil {
		t.Fatal(err)
	}
	if got := ids(find(t, ix, "rewritten")); got != "s1/a" {
		t.Errorf("rewritten: %q", got)
	}
	if got := ids(find(t, ix, "please")); got != "" {
		t.Errorf("old text still found: %q", got)
	}
	n, err := ix.EraseSession(context.Background(), "s1")
	if err != nil || n != 2 {
		t.Fatalf("erased %d, %v", n, err)
	}
	if got := ids(find(t, ix, "session:s1")); got != "" {
		t.Errorf("after erase: %q", got)
	}
	if c, _ := ix.DocCount(); c != 3 {
		t.Errorf("%d documents left, want 3", c)
	}
}

func TestOpenRebuilds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "search")
	ix, err := Open(dir)
	if err != nil || !ix.Rebuilt || ix.Why != "" {
		t.Fatalf("new index: rebuilt %v why %q err %v", ix != nil && ix.Rebuilt, ix.Why, err)
	}
	if err := ix.Write(testDocs(), "PI_LOCAL", 9); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("index dir mode %v, %v", st.Mode(), err)
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, _ := d.Info(); info.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s is %v", p, info.Mode())
			}
		}
		return nil
	})

	// Reopened: kept, positions and all.
	ix = openTest(t, dir)
	if pos, _ := ix.Position("PI_LOCAL"); ix.Rebuilt || pos != 9 {
		t.Fatalf("reopened: rebuilt %v, position %d", ix.Rebuilt, pos)
	}
	// Another format: rebuilt empty.
	if err := ix.idx.SetInternal([]byte(keyFormat), []byte("0")); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	ix = openTest(t, dir)
	if pos, _ := ix.Position("PI_LOCAL"); !ix.Rebuilt || pos != 0 || !strings.Contains(ix.Why, "format") {
		t.Fatalf("old format: rebuilt %v (%s), position %d", ix.Rebuilt, ix.Why, pos)
	}
	ix.Close()
	// Corrupt: rebuilt.
	if err := os.WriteFile(filepath.Join(dir, "index_meta.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	ix = openTest(t, dir)
	if c, _ := ix.DocCount(); !ix.Rebuilt || ix.Why == "" || c != 0 {
		t.Fatalf("corrupt: rebuilt %v (%s), %d docs", ix.Rebuilt, ix.Why, c)
	}
}

func TestHandler(t *testing.T) {
	ix := openTest(t, filepath.Join(t.TempDir(), "search"))
	if err := ix.Write(testDocs(), "PI_LOCAL", 5); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ix.Handler(nil))
	defer srv.Close()
	get := func(params url.Values) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/api/search?" + params.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%v: body not JSON: %v", params, err)
		}
		return resp.StatusCode, body
	}
	code, body := get(url.Values{"q": {"frobnicator"}, "limit": {"2"}})
	if code != 200 || body["total"] != 4.0 || len(body["hits"].([]any)) != 2 || body["next"] != 2.0 || body["query"] != "frobnicator" || body["unindexed"] != nil {
		t.Fatalf("%d %v", code, body)
	}
	// What the index has yet to read, when the handler is told.
	told := httptest.NewServer(ix.Handler(func(context.Context) (int64, error) { return 42, nil }))
	defer told.Close()
	resp, err := http.Get(told.URL + "/api/search?q=frobnicator")
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || res.Unindexed != 42 || res.Total != 4 {
		t.Fatalf("told 42 unindexed: %+v, %v", res, err)
	}
	resp.Body.Close()
	code, body = get(url.Values{"q": {"frobnicator"}, "limit": {"2"}, "after": {"2"}})
	if code != 200 || len(body["hits"].([]any)) != 2 || body["next"] != nil {
		t.Fatalf("page 2: %d %v", code, body)
	}
	code, body = get(url.Values{"session": {"s2"}})
	if code != 200 || body["total"] != 2.0 {
		t.Fatalf("session only: %d %v", code, body)
	}
	h := body["hits"].([]any)[0].(map[string]any)
	for _, k := range []string{"sessionId", "entryId", "node", "type", "snippet", "highlights", "score"} {
		if _, ok := h[k]; !ok {
			t.Errorf("hit lacks %s: %v", k, h)
		}
	}
	// Hostile or wrong input: a 400 that says why, never a crash or a
	// query that runs unbounded.
	for _, p := range []url.Values{
		{"q": {""}},
		{"q": {`"open`}},
		{"q": {strings.Repeat("x", MaxQueryBytes+1)}},
		{"q": {"a"}, "limit": {"0"}},
		{"q": {"a"}, "limit": {"100000"}},
		{"q": {"a"}, "limit": {"-1"}},
		{"q": {"a"}, "after": {"99999999999999999999"}},
		{"q": {"a"}, "after": {"x"}},
		{"q": {"session:a"}, "session": {"b"}},
		{"q": {"a"}, "session": {strings.Repeat("s", 300)}},
		{"q": {"\xff"}},
	} {
		code, body := get(p)
		if code != 400 || body["error"] == "" {
			t.Errorf("%v: %d %v, want 400 with an error", p, code, body)
		}
	}
	// Wildcards, regexps and query syntax are words, matched as text.
	for _, q := range []string{"*", "/.*/", "frob*", "f~2", "text:frobnicator", `+frob -"`, "<script>alert(1)</script>"} {
		code, body := get(url.Values{"q": {q}})
		if code == 200 && body["total"] != 0.0 {
			t.Errorf("%q matched %v", q, body["total"])
		}
		if code != 200 && code != 400 {
			t.Errorf("%q: %d %v", q, code, body)
		}
	}
	resp, err = http.Post(srv.URL+"/api/search?q=a", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestEraseLeavesNoText(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "search")
	ix := openTest(t, dir)
	const secret = "hunter2-0a9c77e1"
	// Several batches: several segments, the secret in one of them.
	if err := ix.Write(testDocs(), "PI_LOCAL", 5); err != nil {
		t.Fatal(err)
	}
	if err := ix.Write([]Doc{{SessionID: "sx", EntryID: "k", Type: "message", Text: "my key is " + secret}}, "PI_LOCAL", 6); err != nil {
		t.Fatal(err)
	}
	if err := ix.Write([]Doc{{SessionID: "s9", EntryID: "z", Type: "message", Text: "later"}}, "PI_LOCAL", 7); err != nil {
		t.Fatal(err)
	}
	if find(t, ix, secret).Total != 1 {
		t.Fatal("the secret is not indexed to begin with")
	}
	ix.Close()
	if len(grepDir(t, dir, secret)) == 0 {
		t.Fatal("the secret is in no file to begin with: the test shows nothing")
	}
	ix = openTest(t, dir)
	if n, err := ix.EraseSession(context.Background(), "sx"); err != nil || n != 1 {
		t.Fatalf("erase: %d, %v", n, err)
	}
	if find(t, ix, secret).Total != 0 || find(t, ix, "later").Total != 1 {
		t.Fatal("erase removed the wrong documents")
	}
	ix.Close()
	if hits := grepDir(t, dir, secret); len(hits) > 0 {
		t.Errorf("the secret is still in %v", hits)
	}
}

// TestEraseAgainAfterACrash: an erase whose deletions were saved but whose
// merge a crash cut short leaves the text in a segment; carried out again
// (as the daemon does at its next start), it finds no document and still
// leaves the text in no file.
func TestEraseAgainAfterACrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "search")
	ix := openTest(t, dir)
	const secret = "hunter2-77e10a9c"
	// One batch, one segment: the merger leaves a lone segment with its
	// deleted documents as it is (compact's marker is there for that), so
	// the deletions below leave the text in it, as a crash would.
	docs := append(testDocs(), Doc{SessionID: "sx", EntryID: "k", Type: "message", Text: "my key is " + secret})
	if err := ix.Write(docs, "PI_LOCAL", 6); err != nil {
		t.Fatal(err)
	}
	// The first attempt: deletions saved, then the crash.
	if n, err := ix.deleteSession(context.Background(), "sx"); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	ix.Close()
	if len(grepDir(t, dir, secret)) == 0 {
		t.Fatal("the secret is in no file after the deletions alone: the test shows nothing")
	}
	ix = openTest(t, dir)
	if n, err := ix.EraseSession(context.Background(), "sx"); err != nil || n != 0 {
		t.Fatalf("erase again: %d, %v", n, err)
	}
	ix.Close()
	if hits := grepDir(t, dir, secret); len(hits) > 0 {
		t.Errorf("the secret is still in %v", hits)
	}
}

func grepDir(t *testing.T, dir, s string) []string {
	var hits []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), s) {
				hits = append(hits, p)
			}
		}
		return nil
	})
	return hits
}

// TestPhraseBudget: a search whose phrases take longer than the budget to
// match in order is run again with each phrase as its words and excluded
// phrases left out, and says so.
func TestPhraseBudget(t *testing.T) {
	ix := openTest(t, filepath.Join(t.TempDir(), "search"))
	docs := []Doc{
		{SessionID: "s1", EntryID: "a", Type: "message", Text: "fix the frob now"},
		{SessionID: "s1", EntryID: "b", Type: "message", Text: "the frob needs a fix"},
		{SessionID: "s1", EntryID: "c", Type: "message", Text: "fix nothing"},
		{SessionID: "s1", EntryID: "d", Type: "message", Text: "frob fix, then fix the frob again"},
	}
	if err := ix.Write(docs, "PI_LOCAL", 4); err != nil {
		t.Fatal(err)
	}
	r := find(t, ix, `"fix the frob"`)
	if got := strings.Join(sorted(strings.Fields(ids(r))), " "); got != "s1/a s1/d" || r.Approximate {
		t.Errorf("within the budget: %q, approximate %v; want s1/a s1/d, exact", got, r.Approximate)
	}
	ix.phraseBudget = 0 // every phrase past its budget
	r = find(t, ix, `"fix the frob"`)
	if got := strings.Join(sorted(strings.Fields(ids(r))), " "); got != "s1/a s1/b s1/d" || !r.Approximate {
		t.Errorf("past the budget: %q, approximate %v; want s1/a s1/b s1/d, approximate", got, r.Approximate)
	}
	// Past the budget an excluded phrase is left out, not its words
	// excluded (which would leave out b, which holds them not in order):
	// bleve reads no deadline while it matches a phrase, and sixteen
	// excluded phrases ran a search past QueryTimeout (a probe).
	r = find(t, ix, `fix -"frob fix"`)
	if got := strings.Join(sorted(strings.Fields(ids(r))), " "); got != "s1/a s1/b s1/c s1/d" || !r.Approximate {
		t.Errorf("fix -\"frob fix\" past the budget: %q, approximate %v; want s1/a s1/b s1/c s1/d, approximate", got, r.Approximate)
	}
	// Within it, the phrase is excluded, in order: b holds its words, not
	// in order.
	ix.phraseBudget = PhraseBudget
	r = find(t, ix, `fix -"frob fix"`)
	if got := strings.Join(sorted(strings.Fields(ids(r))), " "); got != "s1/a s1/b s1/c" || r.Approximate {
		t.Errorf("fix -\"frob fix\": %q, approximate %v; want s1/a s1/b s1/c, exact", got, r.Approximate)
	}
	// A query without phrases is exact whatever the budget.
	if r := find(t, ix, "frob"); r.Approximate || r.Total != 3 {
		t.Errorf("frob: %d hits, approximate %v", r.Total, r.Approximate)
	}
}

// TestInvisibleCharactersHideNoWord: a zero-width space, a soft hyphen or
// a word joiner inside a word hid it from search (a probe on 2026-12-06);
// the word is found, and marked where it is in the text.
func TestInvisibleCharactersHideNoWord(t *testing.T) {
	ix := openTest(t, filepath.Join(t.TempDir(), "search"))
	text := "the key: hun\u200bter2 and pass\u00adword and to\u2060ken, plain"
	if err := ix.Write([]Doc{{SessionID: "s1", EntryID: "a", Type: "message", Text: text}}, "PI_LOCAL", 1); err != nil {
		t.Fatal(err)
	}
	for word, marked := range map[string]string{"hunter2": "hun\u200bter2", "password": "pass\u00adword", "token": "to\u2060ken", "plain": "plain"} {
		r := find(t, ix, word)
		if r.Total != 1 {
			t.Errorf("%q: %d hits, want 1", word, r.Total)
			continue
		}
		h := r.Hits[0]
		var got []string
		for _, m := range h.Highlights {
			got = append(got, string(utf16.Decode(utf16.Encode([]rune(h.Snippet))[m[0]:m[1]])))
		}
		if len(got) != 1 || got[0] != marked {
			t.Errorf("%q: marked %q in %q, want %q", word, got, h.Snippet, marked)
		}
	}
	// A query with the invisible character finds the word too.
	if r := find(t, ix, "hun\u200bter2"); r.Total != 1 {
		t.Errorf("a query holding the zero-width space: %d hits", r.Total)
	}
}
