package session

import "fmt"

// current is the context state at the tree's own leaf, maintained by
// Append: extending the leaf's branch costs O(1), a compaction costs its
// kept range, anything else (a branch switch, a duplicate id, an orphan
// finding its parent) marks it stale and the next Context recomputes it.
type current struct {
	valid bool
	leaf  int32   // path start, -1 for an empty path
	win   []int32 // buildContextEntries window
	think int32   // deciding thinking_level_change, -1: "off"
	model int32   // deciding model_change or assistant message, -1: null
	bad   int32   // a message entry without message on the path, -1: none
	err   error
}

// advance updates the current state after node idx (with resolved parent
// or -1) became the leaf.
func (t *Tree) advance(idx, parent int32, disturbs bool) {
	c := &t.cur
	n := &t.nodes[idx]
	switch {
	case n.id.kind == idNull:
		*c = current{valid: true, leaf: -1, think: -1, model: -1, bad: -1}
		return
	case disturbs:
		c.valid = false
		return
	case parent < 0:
		// A new root (or an orphan): the path is this entry alone.
		*c = current{valid: true, leaf: idx, win: []int32{idx}, think: -1, model: -1, bad: -1}
	case c.valid && c.err == nil && c.leaf >= 0 && parent == c.leaf:
		c.leaf = idx
		if n.isType("compaction") {
			c.win = t.compactionWindow(idx, parent, t.Rules())
		} else {
			c.win = append(c.win, idx)
		}
	default:
		c.valid = false
		return
	}
	c.apply(n, idx)
}

// apply records a path entry's effect on the settings (spec §7.1).
func (c *current) apply(n *node, idx int32) {
	if n.typ.kind != idString {
		return
	}
	switch n.typ.s {
	case "thinking_level_change":
		c.think = idx
	case "model_change":
		c.model = idx
	case "message":
		if n.x != nil && n.x.msgMissing && c.bad < 0 {
			c.bad = idx
		}
		if n.x != nil && n.x.assistant {
			c.model = idx
		}
	}
}

// compactionWindow is the window of a compaction appended below the leaf
// parent: the kept range is the part of its ancestry from the entry named
// firstKeptEntryId, which is found by walking up no further than that entry
// (or the root, when the id names an entry off the path).
func (t *Tree) compactionWindow(idx, parent int32, r RuleSet) []int32 {
	win := []int32{idx}
	x := t.nodes[idx].x
	if x == nil || (x.tail && r == RulesSeed) || !x.firstKept.truthy() || !x.firstKept.mapKey() {
		return win
	}
	target, ok := t.index[x.firstKept]
	if !ok {
		return win
	}
	var kept []int32
	for i, steps := parent, 0; i >= 0 && steps <= len(t.nodes); i, steps = t.parentOf(i), steps+1 {
		kept = append(kept, i)
		if i == target {
			for k := len(kept) - 1; k >= 0; k-- {
				if r == RulesPi16 && t.nodes[kept[k]].flags&flagSystem != 0 {
					continue // [1.6] system messages are not kept
				}
				win = append(win, kept[k])
			}
			return win
		}
	}
	return win
}

// compute builds the state for the path starting at start from scratch,
// under the rule set r.
func (t *Tree) compute(start int32, r RuleSet) current {
	c := current{valid: true, leaf: start, think: -1, model: -1, bad: -1}
	path, err := t.pathFrom(start)
	if err != nil {
		c.err = err
		return c
	}
	for _, i := range path {
		c.apply(&t.nodes[i], i)
	}
	c.win = t.windowOf(path, r)
	return c
}

// windowOf is buildContextEntries (spec §7.2) over a path, under r.
func (t *Tree) windowOf(path []int32, r RuleSet) []int32 {
	comp := int32(-1)
	for _, i := range path {
		if t.nodes[i].isType("compaction") {
			comp = i
		}
	}
	if comp < 0 {
		return path
	}
	c := &t.nodes[comp]
	// pi looks the compaction up again by id (findIndex, ===): an object
	// id equals only itself, which node identity stands in for.
	ci := -1
	for k, i := range path {
		if i == comp || t.nodes[i].id.same(c.id) {
			ci = k
			break
		}
	}
	if ci < 0 {
		return path
	}
	win := []int32{comp}
	if c.x == nil || !c.x.tail || r == RulesPi16 {
		var fk ID
		if c.x != nil {
			fk = c.x.firstKept
		}
		found := false
		for _, i := range path[:ci] {
			if !found && t.nodes[i].id.same(fk) {
				found = true
			}
			if found && !(r == RulesPi16 && t.nodes[i].flags&flagSystem != 0) {
				win = append(win, i)
			}
		}
	}
	return append(win, path[ci+1:]...)
}

// state returns the current state, recomputing a stale one.
func (t *Tree) state0() *current {
	if !t.cur.valid {
		t.cur = t.compute(t.startNode(t.leafID, t.hasLeaf), t.Rules())
	}
	return &t.cur
}

func (c *current) check(t *Tree) error {
	if c.err != nil {
		return c.err
	}
	if c.bad >= 0 {
		b, _ := t.nodes[c.bad].id.MarshalJSON()
		return fmt.Errorf("%w (entry %s)", ErrMissingMessage, b)
	}
	return nil
}
