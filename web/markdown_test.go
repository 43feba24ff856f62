package web

import (
	"bytes"
	"strings"
	"testing"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

const plainPrefix = `<pre class="plain">`

// TestMarkdownHostileIsBounded: a text whose markdown costs far more
// than its length (a wide table over short rows, which goldmark pads to
// the header; the parser's slow cases; deep nesting) is shown as
// escaped preformatted text, and no rendering is more than a few times
// its text.
func TestMarkdownHostileIsBounded(t *testing.T) {
	md := newMarkdown()
	for name, src := range hostileMarkdown(maxMarkdown) {
		var b bytes.Buffer
		md.render(&b, src)
		out := b.String()
		if max := 8*len(src) + 4096; len(out) > max {
			t.Errorf("%s: %d bytes of text rendered as %d bytes, over %d", name, len(src), len(out), max)
		}
		switch name {
		case "table1000", "table64", "table-quoted", "table-listed", "delims", "links", "images", "quotes", "olists", "mixlists":
		default:
			continue // cheap, whichever way it is shown
		}
		if !strings.HasPrefix(out, plainPrefix) {
			t.Errorf("%s: rendered as markdown (%d bytes), want the text preformatted", name, len(out))
		}
	}
}

// TestMarkdownOverCapIsPlain: a text over maxMarkdown is preformatted
// text, however plain its markdown.
func TestMarkdownOverCapIsPlain(t *testing.T) {
	md := newMarkdown()
	src := strings.Repeat("some **bold** words\n", 40<<10/20)
	var b bytes.Buffer
	md.render(&b, src)
	if !strings.HasPrefix(b.String(), plainPrefix) {
		t.Errorf("%d bytes rendered as markdown, want the text preformatted", len(src))
	}
}

// TestMarkdownOutputCap: a text the pre-scan lets through but whose
// HTML outgrows the cap (block quotes 30 deep on every line: each '>'
// becomes a <blockquote> pair) falls back to preformatted text.
func TestMarkdownOutputCap(t *testing.T) {
	md := newMarkdown()
	src := strings.Repeat(strings.Repeat("> ", 30)+"a\n\n", 400)
	var b bytes.Buffer
	md.render(&b, src)
	if !strings.HasPrefix(b.String(), plainPrefix) || b.Len() > 8*len(src)+4096 {
		t.Errorf("%d bytes rendered as %d bytes (%.40q…), want the text preformatted", len(src), b.Len(), b.String())
	}
}

// TestMarkdownOrdinaryRenders: the bounds leave ordinary markdown alone:
// a 10-column table of 100 rows, a long list, emphasis and code.
func TestMarkdownOrdinaryRenders(t *testing.T) {
	md := newMarkdown()
	var s strings.Builder
	s.WriteString("# Results\n\nSome *emphasis*, **strong**, `code_with_underscores` and snake_case_names.\n\n")
	s.WriteString("|" + strings.Repeat(" col |", 10) + "\n|" + strings.Repeat("---|", 10) + "\n")
	for range 100 {
		s.WriteString("| **v** |" + strings.Repeat(" v |", 9) + "\n")
	}
	s.WriteString("\n")
	for range 200 {
		s.WriteString("- item with a [link](https://example.com/x) and _stress_\n")
	}
	s.WriteString("\n```go\nfunc f(a, b *int) { *a = *b }\n```\n")
	var b bytes.Buffer
	md.render(&b, s.String())
	out := b.String()
	for _, want := range []string{`<div class="md">`, "<table>", "<em>emphasis</em>", `<a href="https://example.com/x">link</a>`, "<pre><code"} {
		if !strings.Contains(out, want) {
			t.Errorf("ordinary markdown (%d bytes) lacks %s", s.Len(), want)
		}
	}
}

// TestMarkdownURLs: a link goes only to http, https, mailto or a path on
// this server, and an image only to the view's own image endpoint, each
// judged as the page holds it, its character references decoded; any
// other image is shown as its alt text.
func TestMarkdownURLs(t *testing.T) {
	md := newMarkdown()
	for _, c := range []struct{ src, want string }{
		{`![ok](/api/s/s1/image/e1/0)`, `<img src="/api/s/s1/image/e1/0" alt="ok" loading="lazy">`},
		{`![ok](/api/s/s1/image/e%3A1/2)`, `<img src="/api/s/s1/image/e%3A1/2" alt="ok" loading="lazy">`},
		{strings.Repeat(`![ok](/api/s/s1/image/e1/0) `, maxMarkdownImages) + `![17th](/api/s/s1/image/e1/0)`, `[image: 17th]`},
		{`![big **one**](/api/s/x/context?x=1)`, `[image: big one]`},
		{`![s](/s/x)`, `[image: s]`},
		{`![q](/api/s/x/image/e/0?x=1)`, `[image: q]`},
		{`![u](/api/s/x/image/../0)`, `[image: u]`},
		{`![u](/api/s/%2E%2e/image/e/0)`, `[image: u]`},
		{`![e](https://evil.example/x.png)`, `[image: e]`},
		{`![e](https&#58;//evil.example/x.png)`, `[image: e]`},
		{`![r](&#x2f;&#x2f;evil.example/x.png)`, `[image: r]`},
		{`![d](data:image/png;base64,AAAA)`, `[image: d]`},
		// A link refused is its text alone (an empty target reloaded
		// the page when clicked: a web probe, 2026-12-07).
		{`[vs](vscode&#58;//evil/x)`, `<p>vs</p>`},
		{`[r](&#x2f;&#x2f;evil.example/x)`, `<p>r</p>`},
		{`[j **bold**](javascript&colon;alert(1))`, `<p>j <strong>bold</strong></p>`},
		{"[ref]\n\n[ref]: vscode&#x3a;//evil/ref", `<p>ref</p>`},
		{`[ok](https://example.com/a?b=1#c)`, `<a href="https://example.com/a?b=1#c">ok</a>`},
		{`[m](mailto:a@example.com)`, `<a href="mailto:a@example.com">m</a>`},
		{`[p](/s/x#e-1)`, `<a href="/s/x#e-1">p</a>`},
		{`[f](#e-1)`, `<a href="#e-1">f</a>`},
	} {
		var b bytes.Buffer
		md.render(&b, c.src)
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.src, b.String(), c.want)
		}
	}
}

// TestMarkdownTableGuard: a wide table, or one of more cells than the
// bound (goldmark's padding counted), is never built, at the top level,
// in a block quote or in a list item: the parse says so and holds no
// table. An ordinary table is built.
func TestMarkdownTableGuard(t *testing.T) {
	md := newMarkdown()
	hostile := hostileMarkdown(maxMarkdown)
	ordinary := "|" + strings.Repeat(" c |", 10) + "\n|" + strings.Repeat("---|", 10) + "\n" + strings.Repeat("|"+strings.Repeat(" v |", 10)+"\n", 100)
	for _, c := range []struct {
		name, src string
		refused   bool
	}{
		{"table1000", hostile["table1000"], true},
		{"table64", hostile["table64"], true},
		{"table-quoted", hostile["table-quoted"], true},
		{"table-listed", hostile["table-listed"], true},
		{"65 columns", "|" + strings.Repeat("a|", 65) + "\n|" + strings.Repeat("-|", 65) + "\n", true},
		{"ordinary", ordinary, false},
	} {
		pc := parser.NewContext()
		doc := md.gm.Parser().Parse(text.NewReader([]byte(c.src)), parser.WithContext(pc))
		tables := 0
		ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if entering && n.Kind() == extast.KindTable {
				tables++
			}
			return ast.WalkContinue, nil
		})
		if tooManyCells(pc) != c.refused || (tables > 0) == c.refused {
			t.Errorf("%s: refused %v with %d tables built, want refused %v", c.name, tooManyCells(pc), tables, c.refused)
		}
	}
}
