package web

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestRenderPi16Entries: pi 1.6's context_edit and usage entries are
// shown for what they are (the entry edited, linked, and what the model is
// given instead; the kind, model and note of a usage), not as a raw JSON
// line, and a hostile target id or note stays text.
func TestRenderPi16Entries(t *testing.T) {
	md := newMarkdown()
	cases := []struct {
		name, line string
		want       []string
		not        []string
	}{
		{"replaced", `{"type":"context_edit","id":"e1","parentId":"a1","timestamp":"2026-11-29T23:08:20.000Z","targetId":"a1","replacement":{"content":"[redacted] **secret** gone"}}`,
			[]string{`context edit of a1`, `<a href="#e-a1">a1</a>`, `the model is given this instead`, `<strong>secret</strong>`}, []string{`"replacement"`, `taken out`}},
		{"replaced by blocks", `{"type":"context_edit","id":"e2","parentId":"a1","targetId":"r1","replacement":{"content":[{"type":"text","text":"shorter output"}]}}`,
			[]string{`context edit of r1`, `shorter output`}, []string{`"type":"text"`}},
		{"removed", `{"type":"context_edit","id":"e3","parentId":"a1","targetId":"u1","replacement":null}`,
			[]string{`context edit: u1 taken out of the context`, `<a href="#e-u1">u1</a>`}, []string{`given this instead`}},
		{"hostile target", `{"type":"context_edit","id":"e4","parentId":"a1","targetId":"\"><script>alert(1)</script>","replacement":null}`,
			[]string{`&lt;script&gt;`, `href="#e-%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E"`}, []string{`<script>`}},
		{"usage", `{"type":"usage","id":"g1","parentId":"a1","kind":"cache_warm","provider":"anthropic","model":"claude-x","usage":{"input":12,"output":3},"note":"<b>warm</b>"}`,
			[]string{`usage · cache_warm · anthropic/claude-x`, `&lt;b&gt;warm&lt;/b&gt;`, `usage · 4 lines`}, []string{`<b>warm`, `line · `}},
	}
	for _, c := range cases {
		var b bytes.Buffer
		md.entry(&b, []byte(c.line), &entryCtx{sid: sid1, id: "x"})
		out := b.String()
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q not in\n%s", c.name, w, out)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out, n) {
				t.Errorf("%s: %q in\n%s", c.name, n, out)
			}
		}
	}
}

// TestFoldedCountsEveryLine: a folded output cut to what an entry shows
// is headed with its own count of lines, not the count of those shown.
func TestFoldedCountsEveryLine(t *testing.T) {
	md := newMarkdown()
	var text strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&text, "line %d %s\n", i, strings.Repeat("x", 1000))
	}
	var b bytes.Buffer
	md.folded(&b, &entryCtx{}, "output", text.String(), false)
	if out := b.String(); !strings.Contains(out, "output · 1001 lines") || !strings.Contains(out, "more not shown") {
		t.Errorf("summary: %.200s", out)
	}
}

// TestImageWithoutAType: an image block with no mime type is said to be
// one ("[image of type  not shown]", the type left blank, before); one of
// a type not shown names it, made safe.
func TestImageWithoutAType(t *testing.T) {
	md := newMarkdown()
	for line, want := range map[string]string{
		`{"type":"message","id":"u1","parentId":null,"message":{"role":"user","content":[{"type":"image","data":"iVBORw0KGgo="}]}}`:                   `[image without a type, not shown]`,
		`{"type":"message","id":"u1","parentId":null,"message":{"role":"user","content":[{"type":"image","mimeType":"text/<b>html","data":"PGI+"}]}}`: `[image of type text/&lt;b&gt;html not shown]`,
	} {
		var b bytes.Buffer
		md.entry(&b, []byte(line), &entryCtx{sid: sid1, id: "u1", images: func(string) string { return "/img/" }})
		if !strings.Contains(b.String(), want) {
			t.Errorf("%q not in\n%s", want, b.String())
		}
	}
}
