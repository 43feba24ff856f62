package session

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// lineSource is a BodySource over kept lines, as a stream consumer would
// hold them (Ref = sequence).
type lineSource [][]byte

func (s lineSource) Body(ref Ref) ([]byte, error) {
	if ref < 0 || int(ref) >= len(s) {
		return nil, fmt.Errorf("no body %d", ref)
	}
	return s[ref], nil
}

func contextString(c *Context, err error) string {
	if err != nil {
		return "error"
	}
	b, _ := c.MarshalJSON()
	return string(b)
}

// TestIncrementalMatchesFull appends every corpus file line by line and
// checks, after each line, that the incrementally kept context equals a
// full load of the same prefix. Under RulesAuto a file switches to pi-1.6
// at its first pi 1.x line, which the kept state must follow.
func TestIncrementalMatchesFull(t *testing.T) {
	for _, c := range append(loadCorpus(t), loadCorpusDir(t, conformance16Dir(t))...) {
		t.Run(c.name, func(t *testing.T) {
			lines := bytes.Split(c.raw, []byte{'\n'})
			tree := NewTree()
			var src lineSource
			var prefix []byte
			step := 1
			if len(lines) > 100 {
				step = 97
			}
			for k, raw := range lines {
				if k > 0 {
					prefix = append(prefix, '\n')
				}
				prefix = append(prefix, raw...)
				l := ParseLine(ToValidUTF8(raw))
				var appendErr error
				if l.Kind.Kept() {
					appendErr = tree.Append(l, Ref(len(src)))
					src = append(src, l.Raw)
				}
				if appendErr != nil || tree.state != 1 {
					continue
				}
				// Every line: the kept window and settings equal a
				// recomputation from scratch (metadata only, cheap).
				inc := *tree.state0()
				scratch := tree.compute(tree.startNode(tree.leafID, tree.hasLeaf), tree.Rules())
				if fmt.Sprint(inc.win, inc.think, inc.model, inc.bad, inc.err) != fmt.Sprint(scratch.win, scratch.think, scratch.model, scratch.bad, scratch.err) {
					t.Fatalf("line %d: incremental state %+v, from scratch %+v", k, inc, scratch)
				}
				if got, want := tree.Heads(), tree.headsFull(); !slices.Equal(got, want) {
					t.Fatalf("line %d: incremental heads %v, from scratch %v", k, got, want)
				}
				if k%step != 0 && k != len(lines)-1 {
					continue
				}
				got := contextString(tree.Context(src))
				f, err := Load(prefix)
				if err != nil {
					t.Fatalf("line %d: full load failed (%v), incremental did not", k, err)
				}
				if want := contextString(f.Context()); got != want {
					t.Fatalf("line %d:\nincremental %s\nfull        %s", k, got, want)
				}
			}
		})
	}
}

// TestIndexOutlivesGrowth: an Index taken part way through a file renders
// the same context after its tree has taken every later line (the nodes
// slice grown and moved many times over) as it did when it was taken.
func TestIndexOutlivesGrowth(t *testing.T) {
	compared := 0
	for _, c := range append(loadCorpus(t), loadCorpusDir(t, conformance16Dir(t))...) {
		lines := bytes.Split(c.raw, []byte{'\n'})
		if len(lines) < 4 {
			continue
		}
		tree := NewTree()
		var src lineSource
		var ix *Index
		var want string
		for k, raw := range lines {
			l := ParseLine(ToValidUTF8(raw))
			if !l.Kind.Kept() {
				continue
			}
			if tree.Append(l, Ref(len(src))) != nil {
				break
			}
			src = append(src, l.Raw)
			if k == len(lines)/2 && tree.state == 1 {
				var err error
				if ix, err = tree.Index(); err != nil {
					break
				}
				want = contextString(ix.Context(src))
			}
		}
		if ix == nil || want == "error" {
			continue
		}
		if got := contextString(ix.Context(src)); got != want {
			t.Errorf("%s: the index's context changed as its tree grew:\nnow  %.300s\nthen %.300s", c.name, got, want)
		}
		compared++
	}
	if compared < 20 {
		t.Errorf("only %d indexes compared", compared)
	}
}

// TestIndexExtendedMatchesBuilt appends every corpus file line by line,
// asking Index after each line (extended from the one before where the
// window only grew), and compares it with one built from scratch (every
// line of a short file, every 37th of a long one). It checks too that an
// Index kept from before did not change meanwhile, nor this one when a
// caller appends to the one before.
func TestIndexExtendedMatchesBuilt(t *testing.T) {
	extended := 0
	for _, c := range append(loadCorpus(t), loadCorpusDir(t, conformance16Dir(t))...) {
		lines := bytes.Split(c.raw, []byte{'\n'})
		step := 1
		if len(lines) > 200 {
			step = 37
		}
		for _, r := range []RuleSet{RulesAuto, RulesSeed, RulesPi16} {
			tree := NewTree()
			tree.SetRules(r)
			var prev, kept, keptCopy *Index
			for k, raw := range lines {
				l := ParseLine(ToValidUTF8(raw))
				if !l.Kind.Kept() {
					continue
				}
				if tree.Append(l, Ref(k)) != nil {
					break
				}
				if tree.state != 1 {
					continue
				}
				got, gerr := tree.Index()
				if gerr == nil && prev != nil && len(prev.EntryIDs) > 0 && len(got.EntryIDs) > len(prev.EntryIDs) && &got.EntryIDs[0] == &prev.EntryIDs[0] {
					extended++
				}
				if gerr == nil {
					prev = got
				}
				if k%step != 0 && k != len(lines)-1 {
					continue
				}
				leaf := tree.leafID
				if !tree.hasLeaf {
					leaf = ID{kind: idNull}
				}
				want, werr := tree.index0(tree.state0(), leaf)
				if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
					t.Fatalf("%s (%v) line %d: Index error %v, built %v", c.name, r, k, gerr, werr)
				}
				if gerr != nil {
					continue
				}
				if !sameIndex(got, want) {
					t.Fatalf("%s (%v) line %d: Index\n%.600s\nbuilt\n%.600s", c.name, r, k, indexString(got), indexString(want))
				}
				if kept != nil {
					if !sameIndex(kept, keptCopy) {
						t.Fatalf("%s (%v) line %d: an Index kept from before changed", c.name, r, k)
					}
					// A caller appending to an Index it holds gets arrays
					// of its own: the Index made since is not touched.
					_ = append(kept.EntryIDs, StringID("intruder"))
					_ = append(kept.Refs, -7)
					_ = append(kept.Sizes, -7)
					if !sameIndex(got, want) {
						t.Fatalf("%s (%v) line %d: an append to an Index kept from before changed this one", c.name, r, k)
					}
				}
				kept, keptCopy = got, cloneIndex(got)
			}
		}
	}
	if extended < 1000 {
		t.Errorf("only %d indexes extended", extended)
	}
}

func sameIndex(a, b *Index) bool {
	if len(a.wins) != len(b.wins) {
		return false
	}
	for k := range a.wins {
		wa, wb := a.wins[k], b.wins[k]
		if a.nodes[wa.n].ref != b.nodes[wb.n].ref || (wa.edit >= 0) != (wb.edit >= 0) ||
			(wa.edit >= 0 && a.nodes[wa.edit].ref != b.nodes[wb.edit].ref) {
			return false
		}
	}
	return a.LeafID == b.LeafID && slices.Equal(a.EntryIDs, b.EntryIDs) && slices.Equal(a.Refs, b.Refs) &&
		slices.Equal(a.Sizes, b.Sizes) && bytes.Equal(a.ThinkingLevel, b.ThinkingLevel) && bytes.Equal(a.Model, b.Model) &&
		a.Rules == b.Rules && a.version == b.version
}

func cloneIndex(ix *Index) *Index {
	c := *ix
	c.EntryIDs, c.Refs, c.Sizes, c.wins = slices.Clone(ix.EntryIDs), slices.Clone(ix.Refs), slices.Clone(ix.Sizes), slices.Clone(ix.wins)
	return &c
}

// indexString is everything an Index holds, as text.
func indexString(ix *Index) string {
	wins := make([]string, len(ix.wins))
	for k, w := range ix.wins {
		e := "-"
		if w.edit >= 0 {
			e = fmt.Sprint(ix.nodes[w.edit].ref)
		}
		wins[k] = fmt.Sprintf("%d/%s", ix.nodes[w.n].ref, e)
	}
	return fmt.Sprintf("leaf=%v ids=%v refs=%v sizes=%v think=%s model=%s rules=%v version=%v wins=%v",
		ix.LeafID, ix.EntryIDs, ix.Refs, ix.Sizes, ix.ThinkingLevel, ix.Model, ix.Rules, ix.version, wins)
}

// TestIndexNotExtendedPastAnEdit: a context_edit in the window may name an
// entry that comes only later; the Index made after it is built whole, so
// that the later entry gets the edit.
func TestIndexNotExtendedPastAnEdit(t *testing.T) {
	lines := []string{
		`{"type":"session","version":3,"id":"edits","timestamp":"2026-11-29T23:00:00.000Z","cwd":"/x"}`,
		`{"type":"message","id":"m1","parentId":null,"timestamp":"2026-11-29T23:00:01.000Z","message":{"role":"user","content":"first","timestamp":1}}`,
		// Two entries before the edit: the window's array grows to four
		// with it, so the entry it names is appended in place (the case
		// an Index could be extended in).
		`{"type":"message","id":"m2","parentId":"m1","timestamp":"2026-11-29T23:00:01.500Z","message":{"role":"user","content":"second","timestamp":1}}`,
		`{"type":"context_edit","id":"e1","parentId":"m2","targetId":"later","replacement":{"content":"edited"},"timestamp":"2026-11-29T23:00:02.000Z"}`,
		`{"type":"message","id":"later","parentId":"e1","timestamp":"2026-11-29T23:00:03.000Z","message":{"role":"user","content":"as written","timestamp":3}}`,
		`{"type":"message","id":"m3","parentId":"later","timestamp":"2026-11-29T23:00:04.000Z","message":{"role":"user","content":"third","timestamp":4}}`,
	}
	tree := NewTree()
	tree.SetRules(RulesPi16)
	edited := false
	for k, raw := range lines {
		if err := tree.Append(ParseLine([]byte(raw)), Ref(k)); err != nil {
			t.Fatal(err)
		}
		got, err := tree.Index()
		if err != nil {
			t.Fatal(err)
		}
		leaf := tree.leafID
		if !tree.hasLeaf {
			leaf = ID{kind: idNull}
		}
		want, err := tree.index0(tree.state0(), leaf)
		if err != nil {
			t.Fatal(err)
		}
		if !sameIndex(got, want) {
			t.Fatalf("line %d: Index\n%s\nbuilt\n%s", k, indexString(got), indexString(want))
		}
		for _, w := range got.wins {
			edited = edited || w.edit >= 0
		}
	}
	if !edited {
		t.Error("the edit applied to no entry: the case is not made")
	}
}

// TestMigrationKeepsIDs: pi's migration keeps the ids of a version 2
// session (version from 2 up to 3), not of a version 1 one (version below
// 2 or missing), and a version 3 session is not migrated.
func TestMigrationKeepsIDs(t *testing.T) {
	for _, c := range []struct {
		header string
		keeps  bool
	}{
		{`{"type":"session","id":"s"}`, false},
		{`{"type":"session","version":1,"id":"s"}`, false},
		{`{"type":"session","version":2,"id":"s"}`, true},
		{`{"type":"session","version":"2","id":"s"}`, true},
		{`{"type":"session","version":2.5,"id":"s"}`, true},
		{`{"type":"session","version":3,"id":"s"}`, false},
	} {
		tr := NewTree()
		if err := tr.Append(ParseLine([]byte(c.header)), 0); err != nil {
			t.Fatalf("%s: %v", c.header, err)
		}
		if got := tr.MigrationKeepsIDs(); got != c.keeps {
			t.Errorf("%s: keeps ids %v, want %v", c.header, got, c.keeps)
		}
	}
}
