package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Context is what pi builds for the LLM at a leaf (buildContextEntries and
// buildSessionContext). It marshals to the corpus shape
// {leafId, contextEntryIds, messages, thinkingLevel, model}.
type Context struct {
	// LeafID is pi's leaf id: null for no leaf; undefined (IsUndefined)
	// when the last line is an id-less pseudo-entry, in which case the JSON
	// has no leafId but "leafIdUndefined": true, as the corpus records it.
	LeafID ID
	// EntryIDs are the ids of the window entries in order (null for an
	// id-less one). retainedTail messages are not entries.
	EntryIDs []ID
	// Messages are the context messages: stored messages verbatim (with
	// pi's content:[] fix) and the messages pi derives from entries.
	Messages []json.RawMessage
	// ThinkingLevel is the deciding value; nil when the deciding
	// thinking_level_change has none (the key is then absent).
	ThinkingLevel json.RawMessage
	// Model is null or {provider, modelId} with undefined fields left out.
	Model json.RawMessage
	// Rules is the rule set the context was built with (not part of the
	// corpus shape; see MarshalReport).
	Rules RuleSet
}

// MarshalJSON writes the corpus shape.
func (c *Context) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	writeHead(plainOut{&b}, c.LeafID, c.EntryIDs)
	for i, m := range c.Messages {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	writeTail(plainOut{&b}, c.ThinkingLevel, c.Model)
	return b.Bytes(), nil
}

// MarshalReport writes the corpus shape with the rule set first:
// {"rules":"pi-1.6","leafId":…}. It is what `pisyncd context --json` and
// the daemon's /context print, so a reader knows which rules built it.
func (c *Context) MarshalReport() ([]byte, error) {
	body, err := c.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := append([]byte(`{"rules":`), jsonQuote(c.Rules.String())...)
	out = append(out, ',')
	return append(out, body[1:]...), nil
}

// Context builds the context at the tree's leaf. Bodies of the window
// entries come from src; nothing else is read.
func (t *Tree) Context(src BodySource) (*Context, error) {
	ix, err := t.Index()
	if err != nil {
		return nil, err
	}
	return t.render(ix, src)
}

// ContextAt builds the context as if pi's branch(id) had moved the leaf
// there; a nil id is resetLeaf() (no leaf, empty context). The tree's own
// leaf does not move.
func (t *Tree) ContextAt(id *string, src BodySource) (*Context, error) {
	ix, err := t.IndexAt(id)
	if err != nil {
		return nil, err
	}
	return t.render(ix, src)
}

// Index is a context without its messages: the leaf, the window and the
// settings, and the refs of the window entries whose bodies the messages
// come from, in window order. Building it reads no bodies; a caller that
// fetches bodies from far away learns from it which ones to fetch.
//
// The arrays behind an Index's slices are never written within the
// lengths it was returned with: the next Index may share them and append
// past those lengths, and a caller may tell an unchanged stretch by its
// array (the projection's pages do).
type Index struct {
	LeafID   ID
	EntryIDs []ID
	Refs     []Ref
	// Sizes are the bytes of the lines Refs name, as appended (Sizes[k]
	// is Refs[k]'s), so a reader can plan its reads within a budget.
	Sizes []int64
	// refPos[k] is the window position (index in EntryIDs) of the entry
	// Refs[k] belongs to: an entry that yields no messages has no ref and
	// a context_edit's ref follows the entry it edits, so Refs is not
	// parallel to EntryIDs and a range of positions maps to its refs only
	// through this (RefSpan).
	refPos        []int32
	ThinkingLevel json.RawMessage
	Model         json.RawMessage
	Rules         RuleSet
	wins          []winEntry // window entries with messages, for EachMessage
	// nodes is the tree's nodes as they were when the Index was made. A
	// tree only appends nodes and never changes one (a reset makes a new
	// slice), so the Index stays valid while its tree grows, and without
	// it, by holding this slice rather than copies: copying each window
	// node was the largest cost of writing a long session's views, a few
	// megabytes each time a 10,000-entry session changed.
	nodes   []node
	version float64 // the tree's header version (the v2 rename)
	// edits: a context_edit in the window names an entry, so a later line
	// can change what an earlier entry yields (Index does not extend it).
	edits bool
}

// winEntry is a window entry whose messages the context holds (its node)
// and the context_edit entry whose replacement applies to them (-1:
// none).
type winEntry struct {
	n, edit int32
}

// Index is Context without the messages (see Index). It fails exactly when
// Context fails for a reason other than its bodies.
//
// Appending to the leaf's branch extends the window (current.win) in
// place, and the Index made before is extended with it (lastIndex): an
// append to a session of 100,000 entries no longer builds its whole index
// again, which its views ask for after every line.
func (t *Tree) Index() (*Index, error) {
	if t.state != 1 {
		return nil, t.loadErr()
	}
	c := t.state0()
	leaf := t.leafID
	if !t.hasLeaf {
		leaf = ID{kind: idNull}
	}
	if err := c.check(t); err != nil {
		return nil, err
	}
	l := &t.lastIndex
	if ix, ok := t.extendIndex(l, c, leaf); ok {
		return ix, nil
	}
	ix, err := t.index0(c, leaf)
	if err != nil {
		*l = lastIndex{}
		return nil, err
	}
	*l = lastIndex{ix: *ix, win: c.win}
	return ix.clipped(), nil
}

// lastIndex is the Index last made at the tree's own leaf, with the window
// it was made of.
type lastIndex struct {
	ix  Index
	win []int32
}

// extendIndex makes the Index of c from l's when c's window is l's with
// entries appended: the same array from the same first entry, longer or
// as long (a window is only ever appended to, or replaced by a new one),
// under the same rules, with no context_edit in l's window or among the
// new entries.
func (t *Tree) extendIndex(l *lastIndex, c *current, leaf ID) (*Index, bool) {
	r := t.Rules()
	if l.ix.edits || l.ix.Rules != r || len(l.win) == 0 || len(c.win) < len(l.win) || &c.win[0] != &l.win[0] {
		return nil, false
	}
	added := c.win[len(l.win):]
	if r == RulesPi16 {
		for _, i := range added {
			if t.nodes[i].isType("context_edit") {
				return nil, false
			}
		}
	}
	ix := l.ix
	ix.LeafID = leaf
	ix.nodes = slices.Clip(t.nodes)
	for k, i := range added {
		n := &t.nodes[i]
		ix.EntryIDs = append(ix.EntryIDs, n.id)
		if yields(n, len(l.win)+k, r) {
			t.addEntry(&ix, len(l.win)+k, i, -1)
		}
	}
	t.settings(&ix, c)
	l.ix, l.win = ix, c.win
	return ix.clipped(), true
}

// clipped is a copy of ix whose slices end at their length: the arrays
// behind them are shared with lastIndex, which appends past that length,
// and a caller appending to one must get an array of its own.
func (ix *Index) clipped() *Index {
	out := *ix
	out.EntryIDs, out.Refs, out.Sizes, out.wins = slices.Clip(out.EntryIDs), slices.Clip(out.Refs), slices.Clip(out.Sizes), slices.Clip(out.wins)
	out.refPos = slices.Clip(out.refPos)
	return &out
}

// RefSpan returns the range [from, to) of Refs that belong to the window
// entries at positions [lo, hi) of EntryIDs, in window order.
func (ix *Index) RefSpan(lo, hi int) (from, to int) {
	at := func(pos int) int {
		k, _ := slices.BinarySearch(ix.refPos, int32(min(pos, len(ix.EntryIDs))))
		return k
	}
	return at(lo), at(hi)
}

// IndexAt is ContextAt without the messages.
func (t *Tree) IndexAt(id *string) (*Index, error) {
	if t.state != 1 {
		return nil, t.loadErr()
	}
	if id == nil {
		c := current{valid: true, leaf: -1, think: -1, model: -1, bad: -1}
		return t.index0(&c, ID{kind: idNull})
	}
	leaf := StringID(*id)
	start, ok := t.index[leaf]
	if !ok {
		return nil, fmt.Errorf("session: leaf %q: %w", *id, ErrUnknownEntry)
	}
	if *id == "" {
		// branch("") finds the entry, but buildSessionPath starts from a
		// falsy leaf id at the last entry of the file instead.
		start = int32(len(t.nodes) - 1)
	}
	c := t.compute(start, t.Rules())
	return t.index0(&c, leaf)
}

func (t *Tree) loadErr() error {
	if t.rejectErr != nil {
		return t.rejectErr
	}
	return ErrNotSession
}

func (t *Tree) index0(c *current, leaf ID) (*Index, error) {
	if err := c.check(t); err != nil {
		return nil, err
	}
	r := t.Rules()
	ix := &Index{LeafID: leaf, EntryIDs: make([]ID, 0, len(c.win)), Rules: r, version: t.version, nodes: slices.Clip(t.nodes),
		wins: make([]winEntry, 0, len(c.win)), Refs: make([]Ref, 0, len(c.win)), Sizes: make([]int64, 0, len(c.win)),
		refPos: make([]int32, 0, len(c.win))}
	edits := t.windowEdits(c.win, r)
	ix.edits = edits != nil
	for k, i := range c.win {
		n := &t.nodes[i]
		ix.EntryIDs = append(ix.EntryIDs, n.id)
		if !yields(n, k, r) {
			continue
		}
		edit := int32(-1)
		if e, ok := edits[n.id]; ok && n.id.mapKey() {
			switch x := t.nodes[e].x; {
			case x.repl == replNull:
				continue // [1.6] replacement null drops the entry's messages
			case n.flags&flagEditable == 0:
				// no message the edit could change
			case x.repl == replAbsent:
				b, _ := n.id.MarshalJSON()
				return nil, fmt.Errorf("%w (entry %s)", ErrContextEdit, b)
			default:
				edit = e
			}
		}
		t.addEntry(ix, k, i, edit)
	}
	t.settings(ix, c)
	return ix, nil
}

// yields reports whether the window entry n, at position k, can yield
// messages.
func yields(n *node, k int, r RuleSet) bool {
	// [1.6] an older compaction inside the kept range yields nothing.
	return producesMessages(n) && (r != RulesPi16 || k == 0 || !n.isType("compaction"))
}

// addEntry adds node i, a window entry with messages at window position
// pos, and the context_edit applying to it (-1: none).
func (t *Tree) addEntry(ix *Index, pos int, i, edit int32) {
	n := &t.nodes[i]
	ix.wins = append(ix.wins, winEntry{n: i, edit: edit})
	ix.Refs = append(ix.Refs, n.ref)
	ix.Sizes = append(ix.Sizes, int64(n.size))
	ix.refPos = append(ix.refPos, int32(pos))
	if edit >= 0 {
		ix.Refs = append(ix.Refs, t.nodes[edit].ref)
		ix.Sizes = append(ix.Sizes, int64(t.nodes[edit].size))
		ix.refPos = append(ix.refPos, int32(pos))
	}
}

// settings sets the thinking level and model of c on ix.
func (t *Tree) settings(ix *Index, c *current) {
	ix.ThinkingLevel = json.RawMessage(`"off"`)
	if c.think >= 0 {
		ix.ThinkingLevel = t.nodes[c.think].x.thinking
	}
	ix.Model = nil
	if c.model >= 0 {
		x := t.nodes[c.model].x
		var fs []field
		if x.provider != nil {
			fs = append(fs, field{"provider", x.provider})
		}
		if x.model != nil {
			fs = append(fs, field{"modelId", x.model})
		}
		ix.Model = encodeFields(fs)
	}
}

// render adds the messages to an index of this tree.
func (t *Tree) render(ix *Index, src BodySource) (*Context, error) { return ix.Context(src) }

// Context builds the whole context of ix in memory, reading its bodies
// from src (see EachMessage; WriteContext writes it without holding it).
func (ix *Index) Context(src BodySource) (*Context, error) {
	out := &Context{LeafID: ix.LeafID, EntryIDs: ix.EntryIDs, ThinkingLevel: ix.ThinkingLevel, Model: ix.Model,
		Messages: make([]json.RawMessage, 0, len(ix.wins)), Rules: ix.Rules}
	err := ix.EachMessage(src, func(m json.RawMessage) error {
		out.Messages = append(out.Messages, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// windowEdits maps each target id to the last context_edit entry of the
// window that names it: [1.6] only edits inside the window count, and the
// latest wins. An object targetId is a key no entry's id can equal.
func (t *Tree) windowEdits(win []int32, r RuleSet) map[ID]int32 {
	if r != RulesPi16 {
		return nil
	}
	var edits map[ID]int32
	for _, i := range win {
		n := &t.nodes[i]
		if !n.isType("context_edit") || n.x == nil || !n.x.target.mapKey() {
			continue
		}
		if edits == nil {
			edits = make(map[ID]int32)
		}
		edits[n.x.target] = i
	}
	return edits
}

// producesMessages reports whether an entry's type can yield messages, so
// that bodies of labels, settings and custom entries are never fetched.
func producesMessages(n *node) bool {
	if n.typ.kind != idString {
		return false
	}
	switch n.typ.s {
	case "message", "custom_message", "branch_summary", "compaction":
		return true
	}
	return false
}
