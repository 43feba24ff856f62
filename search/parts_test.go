package search

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestPartsFilter(t *testing.T) {
	an := newMapping().AnalyzerNamed(indexAnalyzerName)
	text := "Fix parser.go, read_config_file and v1.5 at 10:30; Ünïcode.go parseConfig HTTPServer v2Beta my_jsonParser.go ABC"
	var got []string
	for _, tok := range an.Analyze([]byte(text)) {
		got = append(got, fmt.Sprintf("%s@%d[%s]", tok.Term, tok.Position, text[tok.Start:tok.End]))
	}
	want := []string{
		"fix@1[Fix]",
		"parser.go@2[parser.go]", "parser@2[parser]", "go@2[go]",
		"read_config_file@3[read_config_file]", "read@3[read]", "config@3[config]", "file@3[file]",
		"and@4[and]",
		"v1.5@5[v1.5]", "v1@5[v1]", "5@5[5]",
		"at@6[at]", "10@7[10]", "30@8[30]",
		"ünïcode.go@9[Ünïcode.go]", "ünïcode@9[Ünïcode]", "go@9[go]",
		"parseconfig@10[parseConfig]", "parse@10[parse]", "config@10[Config]",
		"httpserver@11[HTTPServer]", "http@11[HTTP]", "server@11[Server]",
		"v2beta@12[v2Beta]", "v2@12[v2]", "beta@12[Beta]",
		"my_jsonparser.go@13[my_jsonParser.go]", "my@13[my]", "jsonparser@13[jsonParser]", "json@13[json]", "parser@13[Parser]", "go@13[go]",
		"abc@14[ABC]",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tokens\n%s\nwant\n%s", strings.Join(got, " "), strings.Join(want, " "))
	}
	// Queries are analyzed without the parts.
	var q []string
	for _, tok := range newMapping().AnalyzerNamed(analyzerName).Analyze([]byte("parser.go read_config_file parseConfig")) {
		q = append(q, string(tok.Term))
	}
	if strings.Join(q, " ") != "parser.go read_config_file parseconfig" {
		t.Errorf("query tokens %q", q)
	}
}

func TestIndexFindsParts(t *testing.T) {
	ix := openTest(t, filepath.Join(t.TempDir(), "search"))
	docs := []Doc{
		{SessionID: "s1", Node: "n1", EntryID: "a", Type: "message", Role: "user", Text: "there is a bug in parser.go, see cmd/pisyncd/main.go"},
		{SessionID: "s1", Node: "n1", EntryID: "b", Type: "message", Role: "assistant", Text: "read_config_file returns early"},
		{SessionID: "s2", Node: "n1", EntryID: "c", Type: "message", Role: "user", Text: "pin it to 1.5, not the parser"},
		{SessionID: "s2", Node: "n1", EntryID: "d", Type: "message", Role: "assistant", Text: "func parseConfigFile(r io.Reader) error"},
	}
	if err := ix.Write(docs, "PI_LOCAL", 4); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ q, want string }{
		{"parser", "s1/a s2/c"},
		{"parser.go", "s1/a"},
		{"PARSER.GO main", "s1/a"},
		{`"bug in parser"`, "s1/a"},
		{`"in parser.go see"`, "s1/a"},
		{`"parser go"`, ""}, // the parts share the word's position
		{"config", "s1/b s2/d"},
		{"parseConfigFile", "s2/d"},
		{"ConfigFile", ""}, // a part is one word of its case
		{"file", "s1/b s2/d"},
		{"read_config_file", "s1/b"},
		{"config_file", ""}, // a part is one word between joiners
		{"1.5", "s2/c"},
		{"5", ""}, // a number is kept whole
		{"parser -parser.go", "s2/c"},
	} {
		r := find(t, ix, tc.q)
		got := strings.Fields(ids(r))
		if strings.Join(sorted(got), " ") != strings.Join(sorted(strings.Fields(tc.want)), " ") {
			t.Errorf("%q: hits %v, want %v", tc.q, got, tc.want)
		}
	}
	// A part is highlighted alone, the whole word as a whole.
	for q, want := range map[string]string{"parser session:s1": "parser", "parser.go": "parser.go", "main": "main", "config session:s2": "Config"} {
		r := find(t, ix, q)
		if len(r.Hits) != 1 {
			t.Fatalf("%q: hits %v", q, ids(r))
		}
		h := r.Hits[0]
		u := utf16.Encode([]rune(h.Snippet))
		var marked []string
		for _, m := range h.Highlights {
			marked = append(marked, string(utf16.Decode(u[m[0]:m[1]])))
		}
		if strings.Join(marked, ",") != want {
			t.Errorf("%q: highlighted %q in %q, want %q", q, marked, h.Snippet, want)
		}
	}
}

func FuzzPartsFilter(f *testing.F) {
	for _, s := range []string{"parser.go", "a._:b", "._.", "1.5 v1.5", "İnfo.go", "x\xff.y", "ａ.ｂ", "a..b__c::d", "parseConfig HTTPServer v2Beta", "ǅemoǈa İİx aB.Cd_EF"} {
		f.Add(s)
	}
	an := newMapping().AnalyzerNamed(indexAnalyzerName)
	plain := newMapping().AnalyzerNamed(analyzerName)
	f.Fuzz(func(t *testing.T, s string) {
		toks := an.Analyze([]byte(s))
		words := plain.Analyze([]byte(s))
		w, pos := 0, 0
		for _, tok := range toks {
			if tok.Start < 0 || tok.End > len(s) || tok.Start > tok.End || len(tok.Term) == 0 {
				t.Fatalf("token %v out of %q", tok, s)
			}
			if tok.Position < pos {
				t.Fatalf("position %d after %d in %q", tok.Position, pos, s)
			}
			if tok.Position > pos {
				// A new position starts with the word itself, as the
				// query analyzer has it.
				if w >= len(words) || string(words[w].Term) != string(tok.Term) {
					t.Fatalf("word %q at %d, want the query's word %d of %q", tok.Term, tok.Position, w, s)
				}
				w++
			}
			pos = tok.Position
		}
		if w != len(words) {
			t.Fatalf("%d words, the query analyzer has %d in %q", w, len(words), s)
		}
	})
}
