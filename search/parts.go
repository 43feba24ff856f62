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
// word: parser.go, std:vector, snake_case_name, a.b.c. In a coding session
// those are file names and identifiers, and a user looking for "parser"
// means parser.go too. The index therefore holds, besides such a word, each
// of its parts at the word's own position (as a synonym would be), so that
// a query for a part finds it, a query for the whole word still finds the
// word (queries are analyzed without the parts), and a phrase through the
// word ("bug in parser") still matches in order.

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
	return nil
})

// partsFilter adds the parts of joined words after each.
type partsFilter struct{}

func isJoiner(b byte) bool { return b == '.' || b == ':' || b == '_' }

func (partsFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	var out analysis.TokenStream
	for i, t := range in {
		if !joined(t.Term) {
			if out != nil {
				out = append(out, t)
			}
			continue
		}
		if out == nil {
			out = make(analysis.TokenStream, i, len(in)+4)
			copy(out, in[:i])
		}
		out = append(out, t)
		// Offsets of the parts in the text: the term is the text's bytes
		// lower-cased, which keeps their length but for a few letters;
		// where it did not, a part is marked as its whole word.
		exact := len(t.Term) == t.End-t.Start
		start := 0
		for j := 0; j <= len(t.Term); j++ {
			if j < len(t.Term) && !isJoiner(t.Term[j]) {
				continue
			}
			if j > start {
				p := &analysis.Token{Term: t.Term[start:j:j], Start: t.Start, End: t.End, Position: t.Position, Type: t.Type}
				if exact {
					p.Start, p.End = t.Start+start, t.Start+j
				}
				out = append(out, p)
			}
			start = j + 1
		}
	}
	if out == nil {
		return in
	}
	return out
}

// joined reports whether term is words joined by a joiner: a joiner, and a
// letter somewhere (a number such as 1.5 or 10:30 is kept whole).
func joined(term []byte) bool {
	if bytes.IndexFunc(term, func(r rune) bool { return r < utf8.RuneSelf && isJoiner(byte(r)) }) < 0 {
		return false
	}
	return bytes.IndexFunc(term, unicode.IsLetter) >= 0
}
