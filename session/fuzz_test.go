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
		checkLineFields(t, raw, l)
	})
}

// checkLineFields: the members ParseLine takes in its one pass are those
// objectMap finds (what the tree read before), the message's too.
func checkLineFields(t *testing.T, raw []byte, l Line) {
	t.Helper()
	if l.Kind != Entry && l.Kind != Header {
		return
	}
	m, err := objectMap(raw)
	if err != nil {
		t.Fatalf("%q: ParseLine kept it, objectMap: %v", raw, err)
	}
	want, got := mapFields(m), l.f
	if !got.ok {
		t.Fatalf("%q: no fields", raw)
	}
	for i, p := range [][2][]byte{{got.id, want.id}, {got.parent, want.parent}, {got.typ, want.typ}, {got.ts, want.ts},
		{got.message, want.message}, {got.targetID, want.targetID}, {got.replacement, want.replacement},
		{got.provider, want.provider}, {got.modelID, want.modelID}, {got.thinking, want.thinking},
		{got.firstKept, want.firstKept}, {got.retainedTail, want.retainedTail}, {got.systemMsg, want.systemMsg},
		{got.fkIndex, want.fkIndex}, {got.label, want.label}, {got.name, want.name}} {
		if !bytes.Equal(p[0], p[1]) || (p[0] == nil) != (p[1] == nil) {
			t.Fatalf("%q: field %d: ParseLine %q, objectMap %q", raw, i, p[0], p[1])
		}
	}
	if !got.msg.ok {
		return
	}
	mm, err := objectMap(got.message)
	if err != nil {
		t.Fatalf("%q: message taken apart, objectMap: %v", raw, err)
	}
	for i, p := range [][2][]byte{{got.msg.role, mm["role"]}, {got.msg.usage, mm["usage"]}, {got.msg.provider, mm["provider"]}, {got.msg.model, mm["model"]}} {
		if !bytes.Equal(p[0], p[1]) || (p[0] == nil) != (p[1] == nil) {
			t.Fatalf("%q: message field %d: ParseLine %q, objectMap %q", raw, i, p[0], p[1])
		}
	}
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
