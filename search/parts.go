package search

import (
	"bytes"
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/registry"
)

// Unicode word segmentation keeps letters joined by '.', ':' or '_' as one
// word: parser.go, std:vector, snake_case_name, a.b.c; and an identifier
// is one word however its words are cased: parseConfig, HTTPServer. In a
// coding session those are file names and identifiers, and a user looking
// for "parser" or "config" means parser.go and parseConfig too. The index
// therefore holds, besides such a word, each of its parts at the word's
// own position (as a synonym would be), so that a query for a part finds
// it, a query for the whole word still finds the word (queries are
// analyzed without the parts), and a phrase through the word ("bug in
// parser") still matches in order.

// partsFilterName is the token filter adding the parts, in bleve's registry.
const partsFilterName = "pisyncd_parts"

// indexAnalyzerName is the analyzer of the indexed text: analyzerName's
// words, then their parts.
const indexAnalyzerName = "pitext_parts"

var registerParts = sync.OnceValue(func() error {
	// bleve builds analyzers from names in its process-wide registry, also
	// when it opens an index whose stored mapping names this filter.
	// Registered once, before any index is made or opened, not in an init:
	// importing the package changes no global state.
	err := registry.RegisterTokenFilter(partsFilterName, func(map[string]any, *registry.Cache) (analysis.TokenFilter, error) {
		return partsFilter{}, nil
	})
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	err = registry.RegisterTokenFilter(invisibleFilterName, func(map[string]any, *registry.Cache) (analysis.TokenFilter, error) {
		return invisibleFilter{}, nil
	})
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	return nil
})

// partsFilter adds the parts of joined words after each. It runs before
// the lower-casing: the case is what splits parseConfig.
type partsFilter struct{}

func isJoiner(r rune) bool { return r == '.' || r == ':' || r == '_' }

func (partsFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	var out analysis.TokenStream
	var buf [][2]int // reused for every word's parts
	for i, t := range in {
		parts := split(t.Term, buf[:0])
		if parts == nil {
			if out != nil {
				out = append(out, t)
			}
			continue
		}
		if out == nil {
			out = make(analysis.TokenStream, i, len(in)+4)
			copy(out, in[:i])
		}
		buf = parts
		out = append(out, t)
		// Offsets of the parts in the text: the term is the text's bytes
		// as the tokenizer cut them; where it is not (a filter before
		// this one changed it), a part is marked as its whole word.
		exact := len(t.Term) == t.End-t.Start
		for _, r := range parts {
			// A copy: the lower-casing after this filter rewrites terms
			// in place, and one part's would write into its word's.
			term := append([]byte(nil), t.Term[r[0]:r[1]]...)
			p := &analysis.Token{Term: term, Start: t.Start, End: t.End, Position: t.Position, Type: t.Type}
			if exact {
				p.Start, p.End = t.Start+r[0], t.Start+r[1]
			}
			out = append(out, p)
		}
	}
	if out == nil {
		return in
	}
	return out
}

// split appends to parts the byte ranges of term's parts: the pieces
// between joiners, and of each piece the words of its case (parse|Config,
// HTTP|Server, v2|Beta); a piece that is one word is not repeated. It
// returns nil when term is one part, or has no letter (a number such as
// 1.5 or 10:30 is kept whole).
func split(term []byte, parts [][2]int) [][2]int {
	if bytes.IndexFunc(term, unicode.IsLetter) < 0 {
		return nil
	}
	n0 := len(parts)
	piece := func(a, b int) {
		if a >= b {
			return
		}
		if a > 0 || b < len(term) {
			parts = append(parts, [2]int{a, b})
		}
		// The words of its case, when there is more than one.
		start, n := a, len(parts)
		prev := rune(-1)
		for i := a; i < b; {
			r, size := utf8.DecodeRune(term[i:])
			next := rune(-1)
			if i+size < b {
				next, _ = utf8.DecodeRune(term[i+size:])
			}
			// A word starts at an upper-case letter after a lower-case
			// one or a digit (parseConfig, v2Beta), or before a
			// lower-case one after upper-case ones (HTTPServer).
			if i > start && unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev) ||
				unicode.IsUpper(prev) && unicode.IsLower(next)) {
				parts = append(parts, [2]int{start, i})
				start = i
			}
			prev = r
			i += size
		}
		if len(parts) > n {
			parts = append(parts, [2]int{start, b})
		}
	}
	start := 0
	for i, r := range string(term) {
		if isJoiner(r) {
			piece(start, i)
			start = i + 1
		}
	}
	piece(start, len(term))
	if len(parts) == n0 {
		return nil // one part: the word itself
	}
	return parts
}
