package session

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestEntryTypesCoverPi: every type a line has in the files real pi wrote
// (both corpora, but for the file made of types pi does not know) is one
// of EntryTypes, which `pisyncd tail --type` names as the types it knows.
func TestEntryTypesCoverPi(t *testing.T) {
	seen := map[string]bool{}
	for _, dir := range []string{testenv.ConformanceDir(t), conformance16Dir(t)} {
		files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no session files (%v)", dir, err)
		}
		for _, path := range files {
			if filepath.Base(path) == "unknown-entry-types.jsonl" {
				continue // types no pi knows, on purpose (MANIFEST.md)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 64<<20)
			for sc.Scan() {
				var l struct{ Type string }
				if json.Unmarshal(sc.Bytes(), &l) == nil && l.Type != "" {
					seen[l.Type] = true
				}
			}
			f.Close()
			if err := sc.Err(); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
	}
	for typ := range seen {
		if !slices.Contains(EntryTypes, typ) {
			t.Errorf("pi wrote a line of type %q, not in EntryTypes", typ)
		}
	}
	for _, typ := range []string{"usage", "context_edit"} {
		if !seen[typ] {
			t.Errorf("no line of type %q in the corpora: the check above cannot see it", typ)
		}
	}
}

// TestEntryTypesNameWithoutACopy: typeName returns each of EntryTypes
// without allocating (its switch is a second list of them).
func TestEntryTypesNameWithoutACopy(t *testing.T) {
	for _, typ := range EntryTypes {
		raw := []byte(`"` + typ + `"`)
		var got string
		if n := testing.AllocsPerRun(10, func() { got, _ = typeName(raw) }); n != 0 || got != typ {
			t.Errorf("typeName(%s) = %q with %v allocations, want %q with none", raw, got, n, typ)
		}
	}
}
