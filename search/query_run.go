package search

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
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
	// Approximate says the query's phrases were matched as their words
	// (all of them, in any order): matching them in order took longer
	// than PhraseBudget.
	Approximate bool `json:"approximate,omitempty"`
	// Unindexed is how many messages of the streams the index had yet to
	// read when the search ran (its first build, a backlog): hits among
	// them are missing.
	Unindexed int64 `json:"unindexed,omitempty"`
}

// PhraseBudget bounds the time a search with phrases spends matching them
// in order. bleve matches a phrase by reading the positions of its words
// in every entry holding all of them: for two words in most entries that
// is seconds over a GiB of sessions (docs/PERFORMANCE.md, "Search").
// Past it the search is run again with each phrase as its words, which
// reads no positions, and its result says it is approximate.
const PhraseBudget = time.Second

// Search runs q, returning limit hits after the first offset ones, best
// first.
func (ix *Index) Search(ctx context.Context, q Query, limit, offset int) (_ Result, err error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	if offset < 0 || offset > MaxOffset {
		return Result{}, badQuery("after must be 0 to %d", MaxOffset)
	}
	if err := ix.rlock(); err != nil {
		return Result{}, err
	}
	defer ix.runlock(&err)
	ix.trim.enter()
	defer ix.trim.exit()
	an, ian := ix.idx.Mapping().AnalyzerNamed(analyzerName), ix.idx.Mapping().AnalyzerNamed(indexAnalyzerName)
	if an == nil || ian == nil {
		return Result{}, fmt.Errorf("search: no analyzer %s or %s", analyzerName, indexAnalyzerName)
	}
	n := 0
	for _, t := range slices.Concat(q.Terms, q.Not) {
		n += len(an.Analyze([]byte(t)))
	}
	if n > MaxWords {
		return Result{}, badQuery("%d words, more than %d (a word with dashes, dots or underscores counts each part)", n, MaxWords)
	}
	bq, words, phrases := q.bleve(an, true)
	run := func(ctx context.Context, bq query.Query) (*bleve.SearchResult, error) {
		req := bleve.NewSearchRequestOptions(bq, limit, offset, false)
		req.Fields = []string{"sessionId", "node", "type", "role", "entryId", "timestamp", "text"}
		// No hit locations from the index: bleve would read the term
		// vectors of every match (hundreds of thousands for a common
		// word) to return those of a page. The page's snippets find their
		// matches themselves.
		return ix.idx.SearchInContext(ctx, req)
	}
	approximate := false
	var res *bleve.SearchResult
	if phrases {
		pctx, cancel := context.WithTimeout(ctx, ix.phraseBudget)
		res, err = run(pctx, bq)
		timedOut := pctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil && timedOut {
			bq, _, _ = q.bleve(an, false)
			approximate = true
			res, err = run(ctx, bq)
		}
	} else {
		res, err = run(ctx, bq)
	}
	if err != nil {
		if ctx.Err() == nil {
			ix.failed() // not a search cut short: perhaps a damaged segment
		}
		return Result{}, fmt.Errorf("search: %w", err)
	}
	out := Result{Total: res.Total, Hits: make([]Hit, 0, len(res.Hits)), Approximate: approximate}
	for _, h := range res.Hits {
		str := func(f string) string { s, _ := h.Fields[f].(string); return s }
		// The text's words as indexed: a part of a word is marked alone.
		snip, marks := makeSnippet(str("text"), matches(ian, str("text"), words))
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

// bleve builds the index query: a term of one token is a term query, one
// of several ("foo.bar") a phrase, or, without inOrder, each of its tokens;
// filters are exact. Without inOrder an excluded phrase is left out:
// excluding its words would leave out more, and matching it in order is
// what ran past PhraseBudget (bleve reads no deadline while it matches a
// phrase: sixteen excluded phrases ran a search to 13 s, past
// QueryTimeout, holding a slot of the four; a probe, 2026-12-07), so the
// approximate answer may hold entries with it. It returns the tokens of
// the terms, which snippets mark, and whether the query holds a phrase.
func (q Query) bleve(an analysis.Analyzer, inOrder bool) (query.Query, map[string]bool, bool) {
	words := map[string]bool{}
	phrases := false
	text := func(t string, inOrder bool) query.Query {
		toks := an.Analyze([]byte(t))
		if len(toks) == 1 {
			tq := bleve.NewTermQuery(string(toks[0].Term))
			tq.SetField("text")
			return tq
		}
		if !inOrder && len(toks) > 1 {
			c := bleve.NewConjunctionQuery()
			for _, tok := range toks {
				tq := bleve.NewTermQuery(string(tok.Term))
				tq.SetField("text")
				c.AddQuery(tq)
			}
			return c
		}
		phrases = true
		p := bleve.NewMatchPhraseQuery(t)
		p.SetField("text")
		p.Analyzer = analyzerName // the words of t, not the parts the text is indexed with
		return p
	}
	b := bleve.NewBooleanQuery()
	for _, t := range q.Terms {
		b.AddMust(text(t, inOrder))
		for _, tok := range an.Analyze([]byte(t)) {
			words[string(tok.Term)] = true
		}
	}
	for _, t := range q.Not {
		if !inOrder && len(an.Analyze([]byte(t))) > 1 {
			continue
		}
		b.AddMustNot(text(t, true))
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
	return b, words, phrases
}

// highlightScan bounds the text of a hit searched for its matches.
const highlightScan = 32 << 10

// matches are the byte ranges of text's tokens that are query words, in
// its first highlightScan bytes.
func matches(an analysis.Analyzer, text string, words map[string]bool) [][2]int {
	if len(words) == 0 {
		return nil
	}
	if len(text) > highlightScan {
		end := highlightScan
		for end > 0 && !utf8.RuneStart(text[end]) {
			end--
		}
		text = text[:end]
	}
	var out [][2]int
	for _, tok := range an.Analyze([]byte(text)) {
		if words[string(tok.Term)] {
			out = append(out, [2]int{tok.Start, tok.End})
		}
	}
	return out
}

// makeSnippet cuts text around its first match, on rune boundaries, and
// returns the matches' ranges in it. locs are sorted byte ranges.
func makeSnippet(text string, locs [][2]int) (string, [][2]int) {
	lo, hi := 0, min(len(text), snippetBytes)
	if len(locs) > 0 {
		first := min(locs[0][0], len(text))
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
		st, en := l[0], l[1]
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
