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
