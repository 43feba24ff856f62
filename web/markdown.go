package web

import (
	"bytes"
	"html"
	"regexp"
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
	src = visible(src)
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

// plain writes src as escaped preformatted text; render, its one caller,
// has shown src's bidi controls already.
func plain(b *bytes.Buffer, src string) {
	b.WriteString(`<pre class="plain">`)
	preText(b, src)
	b.WriteString(`</pre>`)
}

// urlFilter empties every link target whose scheme is not on the
// allowlist, and shows as text every image not of this view, whatever
// the renderer would make of them. It judges each target as the renderer
// will write it, its character references and escapes decoded: the
// source's "vscode&#58;//x" is "vscode://x" in the page.
type urlFilter struct{}

func (urlFilter) Transform(doc *ast.Document, reader text.Reader, pc parser.Context) {
	src := reader.Source()
	type swap struct{ old, new ast.Node }
	var swaps []swap // applied after the walk, which must not see the tree change
	var unwrap []ast.Node
	images := 0
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			if !safeURL(string(n.Destination)) || !safeURL(string(util.URLEscape(n.Destination, true))) {
				// Its text alone: a link with an empty target, styled as
				// one, reloaded the page when clicked (and lost the view
				// chosen).
				unwrap = append(unwrap, n)
				return ast.WalkSkipChildren, nil
			}
		case *ast.Image:
			images++
			if images > maxMarkdownImages || !imageURL(string(util.URLEscape(n.Destination, true))) {
				// Only the view's own images, a few: any other path here
				// could be a costly answer (a session, its context), fetched
				// by every viewer, and no image from elsewhere. Its alt
				// text instead.
				swaps = append(swaps, swap{n, ast.NewString([]byte("[image: " + clipLine(altText(n, src)) + "]"))})
				return ast.WalkSkipChildren, nil
			}
			n.SetAttributeString("loading", "lazy")
		case *ast.AutoLink:
			if !safeURL(string(n.URL(src))) || !safeURL(string(util.URLEscape(n.URL(src), false))) {
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
	for _, n := range unwrap {
		p := n.Parent()
		if p == nil {
			continue
		}
		for c := n.FirstChild(); c != nil; {
			next := c.NextSibling()
			p.InsertBefore(p, n, c) // moves c out of n
			c = next
		}
		p.RemoveChild(p, n)
	}
}

// maxMarkdownImages bounds the images one text shows.
const maxMarkdownImages = 16

// altText is the text of an image's description, its markup left out.
func altText(n ast.Node, src []byte) string {
	var b strings.Builder
	ast.Walk(n, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			switch n := n.(type) {
			case *ast.Text:
				b.Write(n.Segment.Value(src))
			case *ast.String:
				b.Write(n.Value)
			}
		}
		return ast.WalkContinue, nil
	})
	return b.String()
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
// this server.
func safeURL(u string) bool {
	u = strings.TrimSpace(u)
	if u == "" {
		return true
	}
	l := strings.ToLower(u)
	if strings.HasPrefix(l, "//") || strings.HasPrefix(l, `\`) || strings.HasPrefix(l, `/\`) {
		return false // another host, scheme-relative
	}
	if i := strings.IndexAny(l, ":/?#"); i >= 0 && l[i] == ':' {
		scheme := l[:i]
		return scheme == "http" || scheme == "https" || scheme == "mailto"
	}
	return true
}

// viewImage is the path of an entry's image as the view serves it
// (GET /api/s/{sid}/image/{entry}/{n}), nothing before or after it.
var viewImage = regexp.MustCompile(`^/api/s/([^/?#\\]+)/image/([^/?#\\]+)/[0-9]{1,9}$`)

// imageURL reports whether u, as the page will hold it, is an image the
// view serves. A segment that starts with a dot, written or escaped, is
// refused: a browser reads "..", "%2e%2e" too, as the parent.
func imageURL(u string) bool {
	m := viewImage.FindStringSubmatch(u)
	if m == nil {
		return false
	}
	for _, seg := range m[1:] {
		if seg[0] == '.' || strings.HasPrefix(strings.ToLower(seg), "%2e") {
			return false
		}
	}
	return true
}

func prioritized(t parser.ASTTransformer) util.PrioritizedValue {
	return util.Prioritized(t, 1000)
}
