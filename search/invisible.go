package search

import (
	"bytes"
	"unicode"

	"github.com/blevesearch/bleve/v2/analysis"
	charregexp "github.com/blevesearch/bleve/v2/analysis/char/regexp"
	"github.com/blevesearch/bleve/v2/mapping"
)

// Text with an invisible character inside a word (a zero-width space, a
// soft hyphen, a word joiner: pasted from a web page, or put there to keep
// a word from being found) hid the word from search: "se\u200bcret" was
// two words, "se\u00adcret" one word that is not "secret" (a probe on
// 2026-12-06). A zero-width space splits words in Unicode's segmentation
// where the others do not: it is made a word joiner first, as long in
// bytes, so that the offsets snippets are marked by stay the text's; then
// every word is stripped of the format characters (Unicode's Cf) in it,
// in the index and in queries alike.

const (
	// joinSpacesName is the char filter making zero-width spaces word
	// joiners, in the index's mapping.
	joinSpacesName = "pisyncd_join_zwsp"
	// invisibleFilterName is the token filter stripping format
	// characters from words, in bleve's registry.
	invisibleFilterName = "pisyncd_invisible"
)

// addJoinSpaces adds the char filter to im.
func addJoinSpaces(im *mapping.IndexMappingImpl) error {
	return im.AddCustomCharFilter(joinSpacesName, map[string]any{
		"type": charregexp.Name, "regexp": "\u200b", "replace": "\u2060",
	})
}

// invisibleFilter strips format characters from each token's term; the
// token keeps its offsets in the text.
type invisibleFilter struct{}

func (invisibleFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	for _, t := range in {
		if bytes.IndexFunc(t.Term, isInvisible) >= 0 {
			t.Term = bytes.Map(func(r rune) rune {
				if isInvisible(r) {
					return -1
				}
				return r
			}, t.Term)
		}
	}
	return in
}

func isInvisible(r rune) bool { return unicode.Is(unicode.Cf, r) }
