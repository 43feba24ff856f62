package web

import "strings"

// bidiControls are the characters that reorder the text around them (the
// embeddings, overrides and isolates of Unicode's bidirectional algorithm)
// and those that are there without being seen: the directional marks and
// the zero-width space, word joiner and no-break space. A command, path or
// name shown with one reads otherwise than it is ("Trojan Source", a URL
// with a space no one sees), and session text is a teammate's, so the view
// shows each as its code point between single guillemets, which neither
// markdown nor HTML gives a meaning. The zero-width joiners (U+200C,
// U+200D) stay: emoji and several scripts are written with them.
var bidiControls = strings.NewReplacer(
	"\u202a", "‹U+202A›", "\u202b", "‹U+202B›", "\u202c", "‹U+202C›", "\u202d", "‹U+202D›", "\u202e", "‹U+202E›",
	"\u2066", "‹U+2066›", "\u2067", "‹U+2067›", "\u2068", "‹U+2068›", "\u2069", "‹U+2069›",
	"\u200e", "‹U+200E›", "\u200f", "‹U+200F›", "\u061c", "‹U+061C›",
	"\u200b", "‹U+200B›", "\u2060", "‹U+2060›", "\ufeff", "‹U+FEFF›",
)

// visible is s with its bidi controls and invisible marks shown
// (bidiControls).
func visible(s string) string {
	// All but two are encoded from the byte 0xE2 on; U+FEFF from 0xEF,
	// U+061C from 0xD8.
	if strings.IndexByte(s, 0xE2) < 0 && strings.IndexByte(s, 0xEF) < 0 && strings.IndexByte(s, 0xD8) < 0 {
		return s
	}
	return bidiControls.Replace(s)
}
