package session

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// addCorpusSeeds seeds a fuzz target with the conformance files, whole or
// line by line.
func addCorpusSeeds(f *testing.F, lines bool) {
	files, _ := filepath.Glob(filepath.Join(testenv.ConformanceDir(f), "*.jsonl"))
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil || len(raw) > 64<<10 {
			continue
		}
		if !lines {
			f.Add(raw)
			continue
		}
		for _, l := range bytes.Split(raw, []byte{'\n'}) {
			f.Add(l)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	addCorpusSeeds(f, true)
	f.Fuzz(func(t *testing.T, raw []byte) {
		l := ParseLine(raw)
		if l.Kind.Kept() != (l.Kind >= Scalar) {
			t.Fatal("Kept disagrees with Kind")
		}
		_ = idFromRaw(raw)
		_ = dateValue(raw)
		_ = truthy(raw)
	})
}

func FuzzRead(f *testing.F) {
	addCorpusSeeds(f, false)
	f.Fuzz(func(t *testing.T, raw []byte) {
		file, err := Load(raw)
		if _, _, err := Summarize(bytes.NewReader(raw), 0); err != nil {
			t.Fatal(err)
		}
		if err != nil {
			return
		}
		tr := file.Tree
		if c, err := file.Context(); err == nil {
			if _, err := c.MarshalJSON(); err != nil {
				t.Fatal(err)
			}
			_, _ = c.LLMMessages()
		}
		_, _ = file.ContextAt(nil)
		for i := 0; i < tr.Len() && i < 50; i++ {
			if id, ok := tr.Entry(i).ID.String(); ok {
				_, _ = file.ContextAt(&id)
			}
		}
		if roots, err := tr.GetTree(); err == nil {
			_ = Preorder(roots)
		}
		_ = tr.InsertionChildren()
		if h, full := tr.Heads(), tr.headsFull(); !slices.Equal(h, full) {
			t.Fatalf("heads %v, from scratch %v", h, full)
		}
		_ = tr.Labels()
		_, _, _ = tr.Name()
		_, _ = tr.MigratedHeader()
		_, _ = file.MigratedEntries()
	})
}
