package web

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// hostileMarkdown are texts whose markdown rendering costs far more than
// their length, each made to n bytes: a wide table header over many short
// rows (goldmark pads each row to the header), and the parser's slow
// cases (unmatched delimiter runs, open link and image brackets, nested
// block quotes).
func hostileMarkdown(n int) map[string]string {
	fill := func(head, unit string) string {
		var b strings.Builder
		b.WriteString(head)
		for b.Len()+len(unit) <= n {
			b.WriteString(unit)
		}
		return b.String()
	}
	// chunked: as many marks between blank lines as costlyMarkdown lets by
	chunked := func(unit string, marks int) string {
		chunk := strings.Repeat(unit, maxMarks/marks) + "\n\n"
		return fill("", chunk)
	}
	return map[string]string{
		"delims-chunked": chunked("*a_", 2),
		"links-chunked":  chunked("[a](", 1),
		"images-chunked": chunked("![a](", 1),
		"links-lines":    chunked("[a](\n", 1),
		"refs-chunked":   chunked("[a][", 2),
		"quotes-nest":    fill("", strings.Repeat(">", maxNest)+"a\n"),
		"lists-nest":     fill("", strings.Repeat("* + ", maxNest/2)+"a\n"),
		"table1000":      fill("|"+strings.Repeat("a|", 1000)+"\n|"+strings.Repeat("-|", 1000)+"\n", "|"+strings.Repeat("x|", 10)+"\n"),
		"table-quoted":   fill("> |"+strings.Repeat("a|", 100)+"\n> |"+strings.Repeat("-|", 100)+"\n", "> |x|\n"),
		"table-listed":   fill("- |"+strings.Repeat("a|", 60)+"\n  |"+strings.Repeat("-|", 60)+"\n", "  |x|\n"),
		"table64":        fill("|"+strings.Repeat("a|", 64)+"\n|"+strings.Repeat("-|", 64)+"\n", "|x|\n"),
		"delims":         fill("", "*a_"),
		"links":          fill("", "[a]("),
		"images":         fill("", "![a]("),
		"quotes":         fill("", ">"),
		"lists":          fill("", "- "),
		"brackets":       fill("", "["),
		"backticks":      fill("", "`a"),
		"olists":         fill("", "1. "),
		"mixlists":       fill("", "* + "),
		"html":           fill("", "<a "),
		"entities":       fill("", "&#"),
		"emphasis":       fill("", "*a **a "),
		"linkify":        fill("", "www.a"),
		"refs":           fill("", "[a]["),
		"parens":         fill("[a](", "("),
		"unders":         fill("", "_a"),
	}
}

// BenchmarkMarkdownHostile prints, for each hostile text at 32 KiB,
// 64 KiB and 256 KiB, the time and the bytes one rendering takes.
func BenchmarkMarkdownHostile(b *testing.B) {
	md := newMarkdown()
	for _, n := range []int{32 << 10, 64 << 10, 256 << 10} {
		for name, src := range hostileMarkdown(n) {
			b.Run(fmt.Sprintf("%s/%dK", name, n>>10), func(b *testing.B) {
				var out int
				for b.Loop() {
					var buf bytes.Buffer
					md.render(&buf, src)
					out = buf.Len()
				}
				b.ReportMetric(float64(out), "out-bytes")
			})
		}
	}
}
