package projection

import (
	"encoding/json"
	"hash/fnv"

	"github.com/pisyncd/pisyncd/session"
)

// value is one KV value to write: its key, its bytes and the hash of its
// content without Src.
type value struct {
	key  string
	data []byte
	hash uint64
}

// refRecorder is the BodySource of an index build: it notes the refs a
// context asks for, in window order, and hands back a stub body. The stub
// is valid for every message-producing entry type, and everything else a
// context holds (window, leaf, model, thinking level, errors) comes from
// metadata, so the index is exact without reading a single body.
type refRecorder struct{ refs []session.Ref }

var stubBody = []byte(`{"message":{}}`)

func (r *refRecorder) Body(ref session.Ref) ([]byte, error) {
	r.refs = append(r.refs, ref)
	return stubBody, nil
}

// buildViews computes every value of the session from its tree and
// catalog entry.
func (s *sessionState) buildViews() ([]value, int) {
	t := s.tree
	src := s.src()
	var out []value
	add := func(key string, content any, withSrc func(Src) any) {
		h := fnv.New64a()
		b, _ := json.Marshal(content)
		h.Write(b)
		data, _ := json.Marshal(withSrc(src))
		out = append(out, value{key: key, data: data, hash: h.Sum64()})
	}

	// Context index.
	var rec refRecorder
	cv := ContextView{PageSize: pageSize, Model: json.RawMessage("null")}
	var ids []json.RawMessage
	if c, err := t.Context(&rec); err != nil {
		cv.Error = err.Error()
		cv.LeafID = rawID(t.Leaf())
	} else {
		cv.LeafID, cv.Thinking = rawID(c.LeafID), c.ThinkingLevel
		if c.Model != nil {
			cv.Model = c.Model
		}
		ids = make([]json.RawMessage, len(c.EntryIDs))
		for i, id := range c.EntryIDs {
			ids[i] = rawID(id)
		}
	}
	cv.Entries, cv.Refs = len(ids), len(rec.refs)
	cv.Pages = (max(len(ids), len(rec.refs)) + pageSize - 1) / pageSize
	for p := 0; p < cv.Pages; p++ {
		pg := ContextPage{Page: p, IDs: window(ids, p), Refs: refStrings(window(rec.refs, p))}
		truncate(&pg)
		add(pageKey(s.sid, p), pg, func(src Src) any { pg.Src = src; return pg })
	}
	add(sessionKey(s.sid, "ctx"), cv, func(src Src) any { v := cv; v.Src = src; return v })

	// Leaf.
	lv := LeafView{LeafID: rawID(t.Leaf())}
	if n := t.Len(); n > 0 {
		e := t.Entry(n - 1)
		lv.Type, _ = e.Type.String()
		lv.Ref = refString(e.Ref)
	}
	add(sessionKey(s.sid, "leaf"), lv, func(src Src) any { v := lv; v.Src = src; return v })

	// Heads.
	heads := t.Heads()
	hv := HeadsView{Total: len(heads), Heads: []Head{}}
	if len(heads) > maxHeads {
		heads, hv.Truncated = heads[len(heads)-maxHeads:], true
	}
	for _, i := range heads {
		e := t.Entry(i)
		hv.Heads = append(hv.Heads, Head{ID: rawID(e.ID), Ref: refString(e.Ref)})
	}
	add(sessionKey(s.sid, "heads"), hv, func(src Src) any { v := hv; v.Src = src; return v })

	// The catalog entry last: it carries the applied sequences, so once
	// it is written everything before it is.
	s.refreshCatalog(&cv)
	s.cat.CtxPages = cv.Pages
	cat := s.cat
	add(sessionKey(s.sid, "cat"), cat, func(Src) any { return cat })
	return out, cv.Pages
}

func rawID(id session.ID) json.RawMessage {
	b, _ := id.MarshalJSON()
	return b
}

func window[T any](xs []T, page int) []T {
	lo := page * pageSize
	if lo >= len(xs) {
		return []T{}
	}
	return xs[lo:min(lo+pageSize, len(xs))]
}

func refStrings(refs []session.Ref) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = refString(r)
	}
	return out
}

// truncate keeps a page under maxValue. Only ids of absurd length can get
// there (2048 pi ids take ~25 KiB); the ids are then cut and the page says
// so, while the refs, which a full context needs, stay whole.
func truncate(pg *ContextPage) {
	size := 64
	for _, r := range pg.Refs {
		size += len(r) + 3
	}
	for i, id := range pg.IDs {
		size += len(id) + 1
		if size > maxValue {
			pg.IDs, pg.Truncated = pg.IDs[:i], true
			return
		}
	}
}
