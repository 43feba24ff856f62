package session

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// FirstMessageMax bounds the first user message a Tree keeps (bytes of
// UTF-8, cut at a rune boundary): a list shows one line of it, and a
// pasted megabyte must not stay in memory for every session.
const FirstMessageMax = 200

// FirstMessage is the text of the session's first user message with text,
// in file order, as pi's session list derives it (spec §9, firstMessage:
// string content, or its text blocks joined by a space), well-formed and
// cut to FirstMessageMax bytes. "" when there is none (pi shows
// "(no messages)").
func (t *Tree) FirstMessage() string { return t.first }

// noteFirst keeps the text of a user message (the raw message object) as
// the first message when it has any text. Where pi's extractTextContent
// would throw, the message has no text here: pi leaves such a file out of
// its list altogether, which a catalog does not do.
func (t *Tree) noteFirst(message json.RawMessage) {
	m, err := objectMap(message)
	if err != nil {
		return
	}
	content, ok := m["content"]
	if !ok {
		return
	}
	text, ok := extractText(content)
	if !ok || text == "" {
		return
	}
	// A copy: the text may be a substring of a decoded line the caller
	// lets go.
	t.first = strings.Clone(CutUTF8(utf8Safe(text), FirstMessageMax))
}

// CutUTF8 returns the longest prefix of s of at most max bytes that ends
// at a rune boundary (s is valid UTF-8).
func CutUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
