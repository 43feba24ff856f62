package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// EntryInfo is the metadata of one entry, in file order.
type EntryInfo struct {
	ID        ID
	ParentID  ID
	Type      ID // the "type" field, normally a string
	Ref       Ref
	Timestamp float64 // Date value of the entry timestamp in ms, NaN if invalid
}

// Entry returns the metadata of the i-th entry (0-based, header excluded).
func (t *Tree) Entry(i int) EntryInfo {
	n := &t.nodes[i]
	return EntryInfo{ID: n.id, ParentID: n.parent, Type: n.typ, Ref: n.ref, Timestamp: n.ts}
}

// Leaf returns pi's leaf id after load: the last entry's id, null when
// there are no entries.
func (t *Tree) Leaf() ID {
	if !t.hasLeaf {
		return ID{kind: idNull}
	}
	return t.leafID
}

// Find returns the position of the entry pi's index holds for a string id.
func (t *Tree) Find(id string) (int, bool) {
	i, ok := t.index[StringID(id)]
	return int(i), ok
}

// TreeNode is a node of pi's getTree(): an entry position and its children
// sorted by timestamp. A duplicated id makes the surviving node appear under
// its parent once per line, so one *TreeNode may occur more than once.
type TreeNode struct {
	Entry    int
	Children []*TreeNode
}

// errTreeTooLarge stops getTree's sorting pass where duplicates make the
// number of visits explode (pi would take just as long).
var errTreeTooLarge = errors.New("session: tree has too many duplicate paths")

// GetTree is pi's getTree(): roots in file order (entries whose parentId is
// null, equal to their own id, or unknown), children sorted by timestamp
// with V8's sort. A cycle reachable from a root (possible only through
// duplicate ids) makes pi loop forever; GetTree returns ErrCycle.
func (t *Tree) GetTree() ([]*TreeNode, error) {
	nodes := make(map[ID]*TreeNode, len(t.nodes))
	own := make([]*TreeNode, len(t.nodes)) // nodes of object ids
	for i := range t.nodes {
		n := &TreeNode{Entry: i}
		if id := t.nodes[i].id; id.mapKey() {
			nodes[id] = n
		} else {
			own[i] = n
		}
	}
	get := func(i int) *TreeNode {
		if own[i] != nil {
			return own[i]
		}
		return nodes[t.nodes[i].id]
	}
	var roots []*TreeNode
	for i := range t.nodes {
		e := &t.nodes[i]
		n := get(i)
		if e.parent.kind == idNull || e.parent.same(e.id) {
			roots = append(roots, n)
			continue
		}
		if p, ok := nodes[e.parent]; ok && e.parent.mapKey() {
			p.Children = append(p.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	if err := t.checkAcyclic(roots); err != nil {
		return nil, err
	}
	less := func(a, b *TreeNode) bool { return t.nodes[a.Entry].ts-t.nodes[b.Entry].ts < 0 }
	stack := append([]*TreeNode(nil), roots...)
	for budget := 10*len(t.nodes) + 1_000_000; len(stack) > 0; budget-- {
		if budget == 0 {
			return nil, errTreeTooLarge
		}
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if len(n.Children) > 1 {
			// sorting compares every child at least once: pi converts
			// each timestamp, and one nested too deep throws
			for _, c := range n.Children {
				if t.nodes[c.Entry].flags&flagBadDate != 0 {
					return nil, ErrDate
				}
			}
		}
		v8Sort(n.Children, less)
		stack = append(stack, n.Children...)
	}
	return roots, nil
}

// checkAcyclic finds a cycle reachable from the roots (depth-first, colors).
func (t *Tree) checkAcyclic(roots []*TreeNode) error {
	color := make(map[*TreeNode]uint8)
	type frame struct {
		n *TreeNode
		k int
	}
	for _, r := range roots {
		if color[r] != 0 {
			continue
		}
		stack := []frame{{r, 0}}
		color[r] = 1
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.k == len(f.n.Children) {
				color[f.n] = 2
				stack = stack[:len(stack)-1]
				continue
			}
			c := f.n.Children[f.k]
			f.k++
			switch color[c] {
			case 1:
				return &CycleError{ID: t.nodes[c.Entry].id}
			case 0:
				color[c] = 1
				stack = append(stack, frame{c, 0})
			}
		}
	}
	return nil
}

// Preorder lists entry positions depth-first in getTree order.
func Preorder(roots []*TreeNode) []int {
	var out []int
	stack := make([]*TreeNode, 0, len(roots))
	for i := len(roots) - 1; i >= 0; i-- {
		stack = append(stack, roots[i])
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, n.Entry)
		for i := len(n.Children) - 1; i >= 0; i-- {
			stack = append(stack, n.Children[i])
		}
	}
	return out
}

// survivors lists, in the order pi's id Map iterates (first occurrence of
// each id), the entry that holds each id.
func (t *Tree) survivors() []int32 {
	// The holder of an id is unique, so "id seen" is "holder listed".
	listed := make([]bool, len(t.nodes))
	out := make([]int32, 0, len(t.nodes))
	for i := range t.nodes {
		id := t.nodes[i].id
		if !id.mapKey() {
			out = append(out, int32(i))
			continue
		}
		if j := t.index[id]; !listed[j] {
			listed[j] = true
			out = append(out, j)
		}
	}
	return out
}

// InsertionChildren is pi's getChildren for every id at once: for each
// parent id (as a JS property name), the surviving entries whose parentId
// is that id, in id-Map order. Unlike GetTree it does not sort.
func (t *Tree) InsertionChildren() map[string][]int {
	surv := t.survivors()
	byParent := make(map[ID][]int)
	for _, i := range surv {
		if p := t.nodes[i].parent; p.mapKey() {
			byParent[p] = append(byParent[p], int(i))
		}
	}
	out := make(map[string][]int)
	for _, i := range surv {
		id := t.nodes[i].id
		if kids := byParent[id]; len(kids) > 0 && id.mapKey() {
			out[id.propName()] = kids
		}
	}
	return out
}

// Heads returns the tips of the tree: surviving entries no surviving entry
// names as its parent. Each is a leaf a user could continue from. The list
// is kept up to date by Append (see updateHeads) and recomputed only after
// a duplicate id or a late parent changed the tree's shape.
func (t *Tree) Heads() []int {
	if !t.headsOK {
		t.heads, t.headsOK = t.headsFull(), true
	}
	return slices.Clone(t.heads)
}

// headsFull computes Heads from scratch.
func (t *Tree) headsFull() []int {
	surv := t.survivors()
	hasChild := make([]bool, len(t.nodes))
	for _, i := range surv {
		if p := t.parentOf(i); p >= 0 && p != i {
			hasChild[p] = true
		}
	}
	out := []int{}
	for _, i := range surv {
		if !hasChild[i] {
			out = append(out, int(i))
		}
	}
	return out
}

// updateHeads follows an appended entry idx (resolved parent or -1). A new
// id is the last survivor and has no children yet (a child waiting for it
// would have made the append disturb), so it becomes the last head and its
// parent stops being one. A duplicate id or a late parent changes which
// entries survive or whose children they are: recompute on the next call.
func (t *Tree) updateHeads(idx, parent int32, disturbs bool) {
	if !t.headsOK {
		return
	}
	if disturbs {
		t.heads, t.headsOK = nil, false
		return
	}
	if parent >= 0 && parent != idx {
		// Usually the previous leaf, the last head.
		for k := len(t.heads) - 1; k >= 0; k-- {
			if t.heads[k] == int(parent) {
				t.heads = slices.Delete(t.heads, k, k+1)
				break
			}
		}
	}
	t.heads = append(t.heads, int(idx))
}

// Labels returns pi's labels of existing entries (file-global, the last
// label entry per target wins, an empty label clears), keyed by the
// target id as a JS property name.
func (t *Tree) Labels() map[string]json.RawMessage {
	out := make(map[string]json.RawMessage)
	for _, i := range t.survivors() {
		id := t.nodes[i].id
		if l, ok := t.labels[id]; ok && id.mapKey() {
			out[id.propName()] = l
		}
	}
	return out
}

// Label returns the label of entry id.
func (t *Tree) Label(id string) (json.RawMessage, bool) {
	l, ok := t.labels[StringID(id)]
	return l, ok
}

// Name is getSessionName(): the trimmed name of the last session_info
// entry in file order on any branch; ok is false when it is absent or
// empty. A name that is not a string makes pi throw; Name returns an error.
// The name is the string pi holds, in WTF-8 like every string this package
// decodes: a lone surrogate stays one (pi's "\ud800" is not "\ufffd"); a
// caller that writes it out as UTF-8 text passes it through ToWellFormed.
func (t *Tree) Name() (name string, ok bool, err error) {
	if t.nameIdx < 0 {
		return "", false, nil
	}
	return jsTrimName(t.nodes[t.nameIdx].x.name)
}

// jsTrimName is `name?.trim() || undefined`.
func jsTrimName(raw json.RawMessage) (string, bool, error) {
	if isAbsent(raw) {
		return "", false, nil
	}
	s, isStr := rawString(raw)
	if !isStr {
		return "", false, fmt.Errorf("session: session_info name is not a string")
	}
	s = strings.TrimFunc(s, isJSSpace)
	return s, s != "", nil
}
