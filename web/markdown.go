package web

import (
	"bytes"
	"html"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// goldmark is the markdown library: pure Go, CommonMark and GFM, and its
// HTML renderer leaves raw HTML out unless told otherwise (we never tell
// it) and drops javascript:, vbscript:, file: and data: link targets.
// urlFilter narrows links further to an allowlist of schemes.

type markdown struct{ gm goldmark.Markdown }

func newMarkdown() *markdown {
	return &markdown{gm: goldmark.New(
		goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList, extension.Linkify),
		goldmark.WithParserOptions(
			parser.WithASTTransformers(prioritized(urlFilter{})),
			parser.WithParagraphTransformers(util.Prioritized(tableGuard{}, 150)), // before the table's, 200
		),
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(htmlAsText{}, 0))),
	)}
}

// render writes src as HTML to b: as markdown when that costs about what
// the text does (see mdbounds.go), else as escaped preformatted text.
func (m *markdown) render(b *bytes.Buffer, src string) {
	if len(src) > maxMarkdown || costlyMarkdown(src) {
		plain(b, src)
		return
	}
	in := []byte(src)
	pc := parser.NewContext()
	doc := m.gm.Parser().Parse(text.NewReader(in), parser.WithContext(pc))
	if tooManyCells(pc) {
		plain(b, src)
		return
	}
	start := b.Len()
	b.WriteString(`<div class="md">`)
	if err := m.gm.Renderer().Render(&capWriter{b: b, left: maxHTML(len(src))}, in, doc); err != nil {
		b.Truncate(start)
		plain(b, src)
		return
	}
	b.WriteString(`</div>`)
}

func plain(b *bytes.Buffer, src string) {
	b.WriteString(`<pre class="plain">`)
	b.WriteString(html.EscapeString(src))
	b.WriteString(`</pre>`)
}

// urlFilter empties every link and image target whose scheme is not on
// the allowlist, whatever the renderer would make of it.
type urlFilter struct{}

func (urlFilter) Transform(doc *ast.Document, reader text.Reader, pc parser.Context) {
	src := reader.Source()
	type swap struct{ old, new ast.Node }
	var swaps []swap // applied after the walk, which must not see the tree change
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			if !safeURL(string(n.Destination), false) {
				n.Destination = nil
			}
		case *ast.Image:
			if !safeURL(string(n.Destination), true) {
				// No image from elsewhere: its target shown as text.
				swaps = append(swaps, swap{n, ast.NewString([]byte("[image: " + clipLine(string(n.Destination)) + "]"))})
				return ast.WalkSkipChildren, nil
			}
		case *ast.AutoLink:
			if !safeURL(string(n.URL(src)), false) {
				// An autolink's target is its text: show the text alone.
				swaps = append(swaps, swap{n, ast.NewString(n.Label(src))})
				return ast.WalkSkipChildren, nil
			}
		}
		return ast.WalkContinue, nil
	})
	for _, s := range swaps {
		if p := s.old.Parent(); p != nil {
			p.ReplaceChild(p, s.old, s.new)
		}
	}
}

// htmlAsText shows raw HTML in markdown as the text it is, escaped, where
// goldmark would leave it out: a reader sees what was written, and none
// of it is markup.
type htmlAsText struct{}

func (htmlAsText) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			segs := n.(*ast.RawHTML).Segments
			for i := 0; i < segs.Len(); i++ {
				seg := segs.At(i)
				w.WriteString(html.EscapeString(string(seg.Value(src))))
			}
		}
		return ast.WalkSkipChildren, nil
	})
	reg.Register(ast.KindHTMLBlock, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		b := n.(*ast.HTMLBlock)
		w.WriteString(`<pre class="plain">`)
		lines := b.Lines()
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			w.WriteString(html.EscapeString(string(seg.Value(src))))
		}
		if b.HasClosure() {
			w.WriteString(html.EscapeString(string(b.ClosureLine.Value(src))))
		}
		w.WriteString(`</pre>`)
		return ast.WalkSkipChildren, nil
	})
}

// safeURL accepts http, https and mailto targets, fragments and paths on
// this server; an image only from this server (the CSP would block any
// other anyway).
func safeURL(u string, image bool) bool {
	u = strings.TrimSpace(u)
	if u == "" {
		return true
	}
	l := strings.ToLower(u)
	if strings.HasPrefix(l, "//") || strings.HasPrefix(l, `\`) || strings.HasPrefix(l, `/\`) {
		return false // another host, scheme-relative
	}
	if i := strings.IndexAny(l, ":/?#"); i >= 0 && l[i] == ':' {
		if image {
			return false
		}
		scheme := l[:i]
		return scheme == "http" || scheme == "https" || scheme == "mailto"
	}
	return true
}

func prioritized(t parser.ASTTransformer) util.PrioritizedValue {
	return util.Prioritized(t, 1000)
}
