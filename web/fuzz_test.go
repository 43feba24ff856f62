package web

import (
	"bytes"
	"testing"
)

// FuzzRenderEntry: whatever a line holds, its rendering is inert markup
// (no script, no handler, no dangerous URL) and rendering does not panic.
func FuzzRenderEntry(f *testing.F) {
	for _, p := range xssPayloads {
		f.Add([]byte(`{"type":"message","id":"a","message":{"role":"user","content":` + quoteJSON(p) + `}}`))
	}
	f.Add([]byte(assistant("a1", "u1", "[x](javascript:alert(1)) <b onmouseover=alert(1)>", "c1")))
	f.Add([]byte(`{"type":"compaction","summary":"<script>x</script>","tokensBefore":5}`))
	f.Add([]byte(`{"type":"custom_message","customType":"<i>","content":[{"type":"image","mimeType":"image/svg+xml","data":"PHN2Zz4="}]}`))
	md := newMarkdown()
	f.Fuzz(func(t *testing.T, line []byte) {
		var b bytes.Buffer
		md.entry(&b, line, &entryCtx{sid: "s", id: `"><script>`, label: "<img src=x onerror=1>", images: imagesOf("s")})
		checkInert(t, b.String())
	})
}

func quoteJSON(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
