package session

import (
	"bytes"
	"encoding/json"
	"fmt"
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
}

// MarshalJSON writes the corpus shape.
func (c *Context) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	if c.LeafID.IsUndefined() {
		b.WriteString(`"leafIdUndefined":true`)
	} else {
		b.WriteString(`"leafId":`)
		id, _ := c.LeafID.MarshalJSON()
		b.Write(id)
	}
	b.WriteString(`,"contextEntryIds":[`)
	for i, id := range c.EntryIDs {
		if i > 0 {
			b.WriteByte(',')
		}
		raw, _ := id.MarshalJSON()
		b.Write(raw)
	}
	b.WriteString(`],"messages":[`)
	for i, m := range c.Messages {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteByte(']')
	if c.ThinkingLevel != nil {
		b.WriteString(`,"thinkingLevel":`)
		b.Write(c.ThinkingLevel)
	}
	b.WriteString(`,"model":`)
	if c.Model == nil {
		b.WriteString("null")
	} else {
		b.Write(c.Model)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
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
type Index struct {
	LeafID        ID
	EntryIDs      []ID
	Refs          []Ref
	ThinkingLevel json.RawMessage
	Model         json.RawMessage
	wins          []int32 // window nodes with messages, for render
}

// Index is Context without the messages (see Index). It fails exactly when
// Context fails for a reason other than its bodies.
func (t *Tree) Index() (*Index, error) {
	if t.state != 1 {
		return nil, t.loadErr()
	}
	c := t.state0()
	leaf := t.leafID
	if !t.hasLeaf {
		leaf = ID{kind: idNull}
	}
	return t.index0(c, leaf)
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
		return nil, fmt.Errorf("session: context at %q: %w", *id, ErrUnknownEntry)
	}
	c := t.compute(start)
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
	ix := &Index{LeafID: leaf, EntryIDs: make([]ID, len(c.win))}
	for k, i := range c.win {
		n := &t.nodes[i]
		ix.EntryIDs[k] = n.id
		if producesMessages(n) {
			ix.wins = append(ix.wins, i)
			ix.Refs = append(ix.Refs, n.ref)
		}
	}
	ix.ThinkingLevel = json.RawMessage(`"off"`)
	if c.think >= 0 {
		ix.ThinkingLevel = t.nodes[c.think].x.thinking
	}
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
	return ix, nil
}

// render adds the messages to an index of this tree.
func (t *Tree) render(ix *Index, src BodySource) (*Context, error) {
	out := &Context{LeafID: ix.LeafID, EntryIDs: ix.EntryIDs, ThinkingLevel: ix.ThinkingLevel, Model: ix.Model,
		Messages: make([]json.RawMessage, 0, len(ix.wins))}
	for _, i := range ix.wins {
		n := &t.nodes[i]
		body, err := src.Body(n.ref)
		if err != nil {
			return nil, fmt.Errorf("session: body of entry %d: %w", n.ref, err)
		}
		if out.Messages, err = t.entryMessages(out.Messages, n, body); err != nil {
			return nil, err
		}
	}
	return out, nil
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
