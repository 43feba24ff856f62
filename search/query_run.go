package search

import (
	"context"
	"fmt"
	"sort"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Limits of one search.
const (
	DefaultLimit = 20
	MaxLimit     = 100
	// MaxOffset bounds paging (after): a deep page costs the scorer every
	// hit before it.
	MaxOffset = 1000
	// snippetBytes is about how much text a snippet holds around its
	// first match.
	snippetBytes  = 240
	maxHighlights = 32
)

// Hit is one entry found.
type Hit struct {
	SessionID string `json:"sessionId"`
	EntryID   string `json:"entryId"` // "" for a session's header (its cwd)
	Node      string `json:"node"`
	Type      string `json:"type"`
	Role      string `json:"role,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	// Snippet is plain text around the first match (never HTML: a page
	// escapes it), with "…" at an end where text of the entry was left
	// out. Highlights are the matches' [start, end) offsets in UTF-16
	// code units of Snippet (the unit of a JavaScript string), so a page
	// can cut it and escape each part.
	Snippet    string   `json:"snippet"`
	Highlights [][2]int `json:"highlights"`
	Score      float64  `json:"score"`
}

// Result is one page of hits.
type Result struct {
	Query string `json:"query"`
	Total uint64 `json:"total"`
	Hits  []Hit  `json:"hits"`
	// Next is the after value of the next page, 0 when there is none.
	Next int `json:"next,omitempty"`
}

// Search runs q, returning limit hits after the first offset ones, best
// first.
func (ix *Index) Search(ctx context.Context, q Query, limit, offset int) (Result, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	if offset < 0 || offset > MaxOffset {
		return Result{}, badQuery("after must be 0 to %d", MaxOffset)
	}
	req := bleve.NewSearchRequestOptions(q.bleve(), limit, offset, false)
	req.Fields = []string{"sessionId", "node", "type", "role", "entryId", "timestamp", "text"}
	req.IncludeLocations = true
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	res, err := ix.idx.SearchInContext(ctx, req)
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	out := Result{Total: res.Total, Hits: make([]Hit, 0, len(res.Hits))}
	for _, h := range res.Hits {
		str := func(f string) string { s, _ := h.Fields[f].(string); return s }
		snip, marks := makeSnippet(str("text"), h.Locations["text"])
		out.Hits = append(out.Hits, Hit{
			SessionID: str("sessionId"), EntryID: str("entryId"), Node: str("node"),
			Type: str("type"), Role: str("role"), Timestamp: str("timestamp"),
			Snippet: snip, Highlights: marks, Score: h.Score,
		})
	}
	if n := offset + len(res.Hits); uint64(n) < res.Total && n <= MaxOffset {
		out.Next = n
	}
	return out, nil
}

// bleve builds the index query: every term a phrase in the text (a word
// of several tokens, "foo.bar", matches them in order), filters exact.
func (q Query) bleve() query.Query {
	b := bleve.NewBooleanQuery()
	for _, t := range q.Terms {
		p := bleve.NewMatchPhraseQuery(t)
		p.SetField("text")
		b.AddMust(p)
	}
	for _, t := range q.Not {
		p := bleve.NewMatchPhraseQuery(t)
		p.SetField("text")
		b.AddMustNot(p)
	}
	for _, f := range []struct{ field, val string }{{"sessionId", q.Session}, {"node", q.Node}, {"type", q.Type}, {"role", q.Role}} {
		if f.val != "" {
			t := bleve.NewTermQuery(f.val)
			t.SetField(f.field)
			b.AddMust(t)
		}
	}
	if len(q.Terms) == 0 {
		b.AddMust(bleve.NewMatchAllQuery()) // filters only
	}
	return b
}

// makeSnippet cuts text around its first match, on rune boundaries, and
// returns the matches' ranges in it.
func makeSnippet(text string, terms search.TermLocationMap) (string, [][2]int) {
	var locs []*search.Location
	for _, ls := range terms {
		locs = append(locs, ls...)
	}
	sort.Slice(locs, func(i, j int) bool { return locs[i].Start < locs[j].Start })
	lo, hi := 0, min(len(text), snippetBytes)
	if len(locs) > 0 {
		first := int(min(locs[0].Start, uint64(len(text))))
		lo = max(0, first-snippetBytes/4)
		hi = min(len(text), lo+snippetBytes)
	}
	for lo > 0 && !utf8.RuneStart(text[lo]) {
		lo--
	}
	for hi < len(text) && !utf8.RuneStart(text[hi]) {
		hi++
	}
	prefix := ""
	if lo > 0 {
		prefix = "…"
	}
	snip := prefix + text[lo:hi]
	if hi < len(text) {
		snip += "…"
	}
	shift := utf16Len(prefix)
	marks := [][2]int{}
	last := -1
	for _, l := range locs {
		st, en := int(l.Start), int(l.End)
		if st < lo || en > hi || st >= en || st < last {
			continue
		}
		last = en
		marks = append(marks, [2]int{shift + utf16Len(text[lo:st]), shift + utf16Len(text[lo:en])})
		if len(marks) == maxHighlights {
			break
		}
	}
	return snip, marks
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
