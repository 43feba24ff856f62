package projection

import (
	"encoding/binary"
	"encoding/json"
	"hash/maphash"

	"github.com/pisyncd/pisyncd/session"
)

// value is one KV value to write: its key, the hash of its content
// without Src, and its bytes, built only when the hash says the value
// changed.
type value struct {
	key  string
	slot int // in the session's writtenHashes
	hash uint64
	data func() []byte
}

// buildViews computes every value of the session from its tree and
// catalog entry, each with its hash under seed; mapCwd is
// Options.MapCwd.
func (s *sessionState) buildViews(seed maphash.Seed, nm *names, mapCwd func(string) string) ([]value, int) {
	t := s.tree
	src := s.src()
	var out []value
	add := func(key string, slot int, content any, withSrc func(Src) any) {
		b, _ := json.Marshal(content)
		out = append(out, value{key: key, slot: slot, hash: maphash.Bytes(seed, b), data: func() []byte {
			data, _ := json.Marshal(withSrc(src))
			return data
		}})
	}

	// Context index.
	// The index is metadata: the tree yields it without reading a body.
	cv := ContextView{PageSize: pageSize, Model: json.RawMessage("null"), Rules: t.Rules().String()}
	var ids []session.ID
	var refs []session.Ref
	ix, err := t.Index()
	if err != nil {
		cv.Error = err.Error()
		cv.LeafID = rawID(t.Leaf())
	} else {
		cv.LeafID, cv.Thinking = rawID(ix.LeafID), ix.ThinkingLevel
		if ix.Model != nil {
			cv.Model = ix.Model
		}
		ids, refs = ix.EntryIDs, ix.Refs
	}
	cv.Entries, cv.Refs = len(ids), len(refs)
	// Pages are cut at window positions: page p holds ids [p*pageSize,
	// (p+1)*pageSize) and the refs of those very entries (refSpan), not
	// the refs at the same indexes, which an entry without messages (a
	// model change) or a context_edit's ref shifts from the ids.
	cv.Pages = (len(ids) + pageSize - 1) / pageSize
	var scratch []byte
	// Each page's memo replaces the one before in place: page p is read
	// before it is written.
	k := s.keep()
	last := k.pages
	k.pages = k.pages[:0]
	for p := 0; p < cv.Pages; p++ {
		// Pages are hashed straight from ids and refs and marshalled only
		// when changed: an append usually changes the last page alone,
		// and a page made of the very arrays it was hashed from last is
		// not hashed again (pageMemo).
		pids, prefs := window(ids, p), refSpan(ix, refs, p)
		memo := newPageMemo(pids, prefs)
		if p < len(last) && last[p].same(memo) {
			memo.hash = last[p].hash
		} else {
			memo.hash = pageHash(seed, pids, prefs, &scratch)
		}
		k.pages = append(k.pages, memo)
		out = append(out, value{key: pageKey(s.sid, p), slot: slotPage0 + p, hash: memo.hash, data: func() []byte {
			return appendPage(nil, p, pids, prefs, src)
		}})
	}
	if len(last) > len(k.pages) {
		clear(last[len(k.pages):]) // pages past the window: the arrays they name may go
	}
	add(sessionKey(s.sid, "ctx"), slotCtx, cv, func(src Src) any { v := cv; v.Src = src; return v })

	// Leaf.
	lv := LeafView{LeafID: rawID(t.Leaf())}
	if n := t.Len(); n > 0 {
		e := t.Entry(n - 1)
		lv.Type, _ = e.Type.String()
		lv.Ref = refString(e.Ref)
	}
	add(sessionKey(s.sid, "leaf"), slotLeaf, lv, func(src Src) any { v := lv; v.Src = src; return v })

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
	add(sessionKey(s.sid, "heads"), slotHeads, hv, func(src Src) any { v := hv; v.Src = src; return v })

	// The catalog entry last: it carries the applied sequences, so once
	// it is written everything before it is.
	s.refreshCatalog(&cv, nm, mapCwd)
	s.cat.CtxPages = cv.Pages
	// Session text stays out of the bucket: a purged value's bytes
	// outlive an erase in the bucket stream's blocks (firstmessage.go).
	cat := s.cat
	cat.FirstMessage = ""
	add(sessionKey(s.sid, "cat"), slotCat, cat, func(Src) any { return cat })
	return out, cv.Pages
}

func rawID(id session.ID) json.RawMessage {
	b, _ := id.MarshalJSON()
	return b
}

// pageHash hashes a context page's content: each id (length-prefixed, so
// no two lists hash alike by construction) and each ref, laid out in
// *scratch (reused from page to page) and hashed in one call. Every page
// of a session is hashed each time it changes, a pass over the whole
// window: hashed byte by byte (FNV), then id by id, it was the largest
// cost of an append to a long session.
func pageHash(seed maphash.Seed, ids []session.ID, refs []session.Ref, scratch *[]byte) uint64 {
	b := binary.LittleEndian.AppendUint64((*scratch)[:0], uint64(len(ids)))
	for _, id := range ids {
		s, ok := id.String()
		if !ok {
			j, _ := id.MarshalJSON() // not a string: its JSON text, tagged apart
			b = binary.LittleEndian.AppendUint64(b, ^uint64(0))
			b = binary.LittleEndian.AppendUint64(b, uint64(len(j)))
			b = append(b, j...)
			continue
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(refs)))
	for _, r := range refs {
		b = binary.LittleEndian.AppendUint64(b, uint64(r))
	}
	*scratch = b
	return maphash.Bytes(seed, b)
}

// pageMemo is what a context page was last hashed from: an Index's arrays
// are never written within what it returned (session.Index), so a page
// of the same arrays, from the same element and as long, holds what it
// held. Extending the Index keeps the arrays of every page but the last.
// The pointers keep the arrays alive: they are dropped with the tree.
type pageMemo struct {
	ids         *session.ID
	refs        *session.Ref
	nIDs, nRefs int
	hash        uint64
}

func newPageMemo(ids []session.ID, refs []session.Ref) pageMemo {
	m := pageMemo{nIDs: len(ids), nRefs: len(refs)}
	if len(ids) > 0 {
		m.ids = &ids[0]
	}
	if len(refs) > 0 {
		m.refs = &refs[0]
	}
	return m
}

// same reports whether m and o name the same arrays over the same lengths.
func (m pageMemo) same(o pageMemo) bool {
	return m.ids == o.ids && m.refs == o.refs && m.nIDs == o.nIDs && m.nRefs == o.nRefs
}

// refSpan is the refs of page p's window entries: ix is nil when the
// index failed, and then there are no refs.
func refSpan(ix *session.Index, refs []session.Ref, page int) []session.Ref {
	if ix == nil {
		return []session.Ref{}
	}
	from, to := ix.RefSpan(page*pageSize, (page+1)*pageSize)
	return refs[from:to:to]
}

func window[T any](xs []T, page int) []T {
	lo := page * pageSize
	if lo >= len(xs) {
		return []T{}
	}
	return xs[lo:min(lo+pageSize, len(xs))]
}
