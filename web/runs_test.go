package web

import (
	"bytes"
	"html"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPreTextRuns: a preformatted text comes out escaped, its text and
// line breaks as they were, short lines as they are, and a line longer
// than runBytes in isolated runs of at most runBytes, none cut inside a
// character (a 1 MB right-to-left line froze the browser's tab for 18 s:
// a web probe, 2026-12-07).
func TestPreTextRuns(t *testing.T) {
	runs := regexp.MustCompile(`<span class="run">([^<]*)</span>`)
	for _, in := range []string{
		"",
		"short <b>&amp;</b>\nlines\n",
		strings.Repeat("שלום ", 58000),
		strings.Repeat("x", 3*runBytes+17) + "\n" + strings.Repeat("é", runBytes) + "\nend",
		strings.Repeat("a<b", runBytes),
		strings.Repeat("日本", 5000) + "\n\n",
	} {
		var b bytes.Buffer
		preText(&b, in)
		out := b.String()
		if got := html.UnescapeString(runs.ReplaceAllString(out, "$1")); got != in {
			t.Errorf("%.40q...: the text written differs from it (%d bytes against %d)", in, len(got), len(in))
		}
		for _, m := range runs.FindAllStringSubmatch(out, -1) {
			if r := html.UnescapeString(m[1]); len(r) > runBytes || !utf8.ValidString(r) || r == "" {
				t.Errorf("%.40q...: a run of %d bytes (valid UTF-8: %v)", in, len(r), utf8.ValidString(r))
			}
		}
		for _, line := range strings.Split(in, "\n") {
			if len(line) <= runBytes && strings.Contains(out, `<span class="run">`+html.EscapeString(line)+`</span>`) && line != "" {
				t.Errorf("%.40q...: a short line in a run", line)
			}
		}
		if n := strings.Count(out, `<span class="run">`); (len(in) <= runBytes) != (n == 0) && !strings.Contains(in, "\n") {
			t.Errorf("%.40q...: %d runs", in, n)
		}
	}
}
