package watch

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pisyncd/pisyncd/session"
)

func checkParseLong(t *testing.T, raw []byte) {
	t.Helper()
	got, want := parseLong(raw), session.ParseLine(raw)
	if got.Kind != want.Kind || got.Type != want.Type || got.ID != want.ID || got.HasID != want.HasID ||
		got.ParentID != want.ParentID || got.HasParent != want.HasParent {
		t.Fatalf("parseLong(%q) = %v %q %q/%v %q/%v, ParseLine says %v %q %q/%v %q/%v", raw,
			got.Kind, got.Type, got.ID, got.HasID, got.ParentID, got.HasParent,
			want.Kind, want.Type, want.ID, want.HasID, want.ParentID, want.HasParent)
	}
}

var parseSeeds = []string{
	``, ` `, "\t\r", `{}`, `[]`, `null`, `0`, `""`, `"x"`, `true`, `{"type":"session","id":"s1"}`,
	`{"type":"message","id":"a","parentId":null}`, `{"id":"a","id":"b"}`, `{"\u0069d":"esc","type":"x"}`,
	`{"id":1,"parentId":"p","type":["session"]}`, ` { "type" : "session" , "id" : "s\"1" } `,
	`{"a":{"id":"inner","b":[1,{"type":"session"}]},"id":"outer"}`, `{"id":"\ud800"}`, "{\"id\":\"\xff\"}",
	`{"type":"session","id":"x"}{}`, `{"a":"}","id":"q"}`, `{"a":-1.5e3,"id":"n","b":false}`,
	`{"parentId":"a","parentId":null}`, "\uFEFF{\"id\":\"bom\"}", `{"type":"session","type":"message"}`,
}

func TestParseLongAgreesWithParseLine(t *testing.T) {
	for _, s := range parseSeeds {
		checkParseLong(t, []byte(s))
	}
}

func FuzzParseLong(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	if files, _ := filepath.Glob("../../shared/conformance/*.jsonl"); len(files) > 0 {
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
				for _, l := range bytes.Split(b, []byte("\n")) {
					f.Add(l)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkParseLong(t, raw) })
}
