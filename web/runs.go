package web

import (
	"bytes"
	"html"
	"strings"
	"unicode/utf8"
)

// runBytes bounds the text of a preformatted block between two line
// breaks that the browser lays out as one bidi paragraph. A paragraph of
// 1 MB of right-to-left words (58,000 of them) took Chromium 18-20 s to
// lay out, the tab frozen meanwhile, where one of Latin words took 0.3 s
// (a web probe, 2026-12-07): anyone who gets text into a session could
// freeze the tab of whoever views it. Each longer line is written as runs
// of at most runBytes, each isolated (CSS `.run`), which Chromium lays out
// one at a time: 0.47 s for the same text. The text and its line breaks
// stay as they were; a right-to-left line longer than a run reads its
// runs from left to right.
const runBytes = 4 << 10

// preText writes s, escaped, as the body of a preformatted block, its
// lines longer than runBytes in isolated runs. s has had its bidi
// controls made visible (visible) where it should.
func preText(b *bytes.Buffer, s string) {
	for s != "" {
		line, rest, nl := strings.Cut(s, "\n")
		if len(line) <= runBytes {
			b.WriteString(html.EscapeString(line))
		} else {
			for line != "" {
				n := runCut(line)
				b.WriteString(`<span class="run">`)
				b.WriteString(html.EscapeString(line[:n]))
				b.WriteString(`</span>`)
				line = line[n:]
			}
		}
		if nl {
			b.WriteByte('\n')
		}
		s = rest
	}
}

// runCut is where the first run of line ends: after its last space in the
// run's last quarter, else at the last rune that fits.
func runCut(line string) int {
	if len(line) <= runBytes {
		return len(line)
	}
	if i := strings.LastIndexByte(line[:runBytes], ' '); i >= runBytes*3/4 {
		return i + 1
	}
	n := runBytes
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	if n == 0 {
		return runBytes // not UTF-8 at all: any cut will do
	}
	return n
}
