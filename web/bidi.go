package web

import "strings"

// bidiControls are the characters that reorder the text around them: the
// embeddings, overrides and isolates of Unicode's bidirectional algorithm.
// A command, path or name shown with one reads otherwise than it is
// ("Trojan Source"), and session text is a teammate's, so the view shows
// each as its code point between single guillemets, which neither
// markdown nor HTML gives a meaning.
var bidiControls = strings.NewReplacer(
	"\u202a", "‹U+202A›", "\u202b", "‹U+202B›", "\u202c", "‹U+202C›", "\u202d", "‹U+202D›", "\u202e", "‹U+202E›",
	"\u2066", "‹U+2066›", "\u2067", "‹U+2067›", "\u2068", "‹U+2068›", "\u2069", "‹U+2069›",
)

// visible is s with its bidi controls shown (bidiControls).
func visible(s string) string {
	// Every one of them is encoded from the byte 0xE2 on.
	if strings.IndexByte(s, 0xE2) < 0 {
		return s
	}
	return bidiControls.Replace(s)
}
