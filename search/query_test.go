package search

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseQuery(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want Query
		err  string
	}{
		{q: "foo bar", want: Query{Terms: []string{"foo", "bar"}}},
		{q: `  "exact phrase"  -not -"not this" x`, want: Query{Terms: []string{"exact phrase", "x"}, Not: []string{"not", "not this"}}},
		{q: "session:abc node:n1 type:message role:user err", want: Query{Terms: []string{"err"}, Session: "abc", Node: "n1", Type: "message", Role: "user"}},
		{q: "session:abc", want: Query{Session: "abc"}},
		{q: "http://x.org/a key:val", want: Query{Terms: []string{"http://x.org/a", "key:val"}}},
		{q: "a - b", want: Query{Terms: []string{"a", "b"}}},
		{q: "foo* /re.*/ ~2 AND", want: Query{Terms: []string{"foo*", "/re.*/", "~2", "AND"}}},
		{q: "", err: "nothing to search for"},
		{q: "-only", err: "nothing to search for"},
		{q: "*** !!!", err: "nothing to search for"},
		{q: `"unclosed`, err: "unclosed quote"},
		{q: "session:", err: "needs a value"},
		{q: "session:a session:b", err: "given twice"},
		{q: strings.Repeat("a", MaxQueryBytes+1), err: "longer than"},
		{q: "\xff\xfe", err: "UTF-8"},
		{q: strings.Repeat("w ", MaxClauses+1), err: "more than"},
	} {
		got, err := ParseQuery(tc.q)
		if tc.err != "" {
			if err == nil || !errors.Is(err, ErrQuery) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseQuery(%q) = %+v, %v; want an error with %q", tc.q, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseQuery(%q) = %+v, %v; want %+v", tc.q, got, err, tc.want)
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"foo bar", `"a b" -c`, "session:x y", `-"`, `"`, "-", "a:b:c", "\x00", "é\u2028x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			if !errors.Is(err, ErrQuery) {
				t.Fatalf("error %v is not ErrQuery", err)
			}
			return
		}
		if len(q.Terms)+len(q.Not) > MaxClauses {
			t.Fatalf("%d clauses", len(q.Terms)+len(q.Not))
		}
		for _, x := range append(append([]string{}, q.Terms...), q.Not...) {
			if !utf8.ValidString(x) || !hasWordChar(x) || x != strings.TrimSpace(x) {
				t.Fatalf("clause %q", x)
			}
		}
		if len(q.Terms) == 0 && q.Session == "" && q.Node == "" && q.Type == "" && q.Role == "" {
			t.Fatal("an empty query was accepted")
		}
		an := newMapping().AnalyzerNamed(analyzerName)
		q.bleve(an, true) // builds without panicking
		q.bleve(an, false)
	})
}

// TestQueryWordsBounded: a query of more words than MaxWords, counted as
// the index splits them, is refused before bleve runs it; one of MaxWords
// runs. (A probe's one word of 512 parts, the-a-the-a-..., ran 40 s.)
func TestQueryWordsBounded(t *testing.T) {
	ix := openTest(t, filepath.Join(t.TempDir(), "search"))
	if err := ix.Write(testDocs(), "PI_LOCAL", 5); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q   string
		bad bool
	}{
		{strings.Repeat("the-a-", 150), true},
		{"x " + strings.Repeat("-aa-bb-cc-dd-ee ", 8), true},
		{strings.TrimSuffix(strings.Repeat("w-", MaxWords), "-"), false},
	} {
		q, err := ParseQuery(c.q)
		if err != nil {
			t.Fatalf("%.40s...: %v", c.q, err)
		}
		_, err = ix.Search(context.Background(), q, 10, 0)
		if got := errors.Is(err, ErrQuery); got != c.bad {
			t.Errorf("%.40s...: %v, want refused %v", c.q, err, c.bad)
		}
	}
}
