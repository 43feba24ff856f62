package projection

import (
	"slices"
	"testing"
)

// The catalog in the bucket and as served must stay what the map gave:
// an object with sorted keys, omitted when empty, and read back.
func TestNodeFilesJSONAsTheMap(t *testing.T) {
	for _, m := range []map[string]string{
		nil,
		{"b": "x/2.jsonl"},
		{"zeta": "z.jsonl", "alpha": `a "quoted" <file>.jsonl`, "mid": "m/ü.jsonl"},
	} {
		var f NodeFiles
		for n, file := range m {
			f.set(n, file)
		}
		for n, file := range m {
			if got := f.Get(n); got != file {
				t.Errorf("Get(%q) = %q, want %q", n, got, file)
			}
		}
		type withMap struct {
			Files map[string]string `json:"files,omitempty"`
		}
		type withSlice struct {
			Files NodeFiles `json:"files,omitempty"`
		}
		sameJSONAs(t, withMap{m}, withSlice{f}, func(x, y withSlice) bool { return slices.Equal(x.Files, y.Files) })
	}
}

func TestNodeFilesSetReplacesAndKeepsOrder(t *testing.T) {
	var f NodeFiles
	f.set("n2", "a")
	f.set("n1", "b")
	if got := f.set("n2", "c"); got != "c" {
		t.Errorf("set returned %q", got)
	}
	want := NodeFiles{{"n1", "b"}, {"n2", "c"}}
	if !slices.Equal(f, want) {
		t.Errorf("files %v, want %v", f, want)
	}
	if f.Get("n3") != "" {
		t.Error("a node without a file has one")
	}
}
