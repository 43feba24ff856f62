package web

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The renderer turns entries (one JSON line each, hostile) into HTML.
// Every string from an entry reaches the page through esc or markdown,
// never otherwise; class names come from a fixed set.

// doc is the part of an entry the view reads. Fields absent or of another
// type stay zero: a line pi accepted may hold anything in them.
type doc struct {
	Type             string          `json:"type"`
	ID               json.RawMessage `json:"id"`
	Timestamp        any             `json:"timestamp"`
	Message          *message        `json:"message"`
	ThinkingLevel    any             `json:"thinkingLevel"`
	Provider         any             `json:"provider"`
	ModelID          any             `json:"modelId"`
	Summary          any             `json:"summary"`
	TokensBefore     any             `json:"tokensBefore"`
	FirstKeptEntryID any             `json:"firstKeptEntryId"`
	FromID           any             `json:"fromId"`
	CustomType       any             `json:"customType"`
	Content          json.RawMessage `json:"content"`
	Display          any             `json:"display"`
	Data             json.RawMessage `json:"data"`
	TargetID         any             `json:"targetId"`
	Label            any             `json:"label"`
	Name             any             `json:"name"`
	Cwd              any             `json:"cwd"`
	// pi 1.6's context_edit and usage entries.
	Replacement json.RawMessage `json:"replacement"`
	Kind        any             `json:"kind"`
	Model       any             `json:"model"`
	Usage       json.RawMessage `json:"usage"`
	Note        any             `json:"note"`
}

type message struct {
	Role         any             `json:"role"`
	Content      json.RawMessage `json:"content"`
	Model        any             `json:"model"`
	Provider     any             `json:"provider"`
	Usage        json.RawMessage `json:"usage"`
	StopReason   any             `json:"stopReason"`
	ErrorMessage any             `json:"errorMessage"`
	ToolCallID   any             `json:"toolCallId"`
	ToolName     any             `json:"toolName"`
	IsError      any             `json:"isError"`
	Command      any             `json:"command"`
	Output       any             `json:"output"`
	ExitCode     any             `json:"exitCode"`
	CustomType   any             `json:"customType"`
	Summary      any             `json:"summary"`
	TokensBefore any             `json:"tokensBefore"`
}

// block is one content block.
type block struct {
	Type      string          `json:"type"`
	Text      any             `json:"text"`
	Thinking  any             `json:"thinking"`
	Data      any             `json:"data"`
	MimeType  any             `json:"mimeType"`
	ID        any             `json:"id"`
	Name      any             `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func parseDoc(raw []byte) (*doc, error) {
	var d doc
	if err := json.Unmarshal(raw, &d); err != nil {
		// A field of an unexpected type fails the whole decode: keep
		// what decodes generically.
		var m map[string]any
		if err2 := json.Unmarshal(raw, &m); err2 != nil {
			return nil, err
		}
		d = doc{}
		d.Type = str(m["type"])
		d.Timestamp = m["timestamp"]
	}
	return &d, nil
}

// parseBlocks reads a message's content with every field of a block.
func parseBlocks(raw json.RawMessage) ([]block, string) { return contentBlocks[block](raw) }

// contentBlocks reads a message's content: a string is its text, an array
// its blocks, B being the part of a block the caller reads (a block that
// does not decode as B is left out; the array is decoded whole first, one
// block at a time only when that fails).
func contentBlocks[B any](raw json.RawMessage) (blocks []B, text string) {
	if len(raw) == 0 {
		return nil, ""
	}
	switch raw[0] {
	case '"':
		json.Unmarshal(raw, &text)
		return nil, text
	case '[':
		if json.Unmarshal(raw, &blocks) == nil {
			return blocks, ""
		}
		var generic []json.RawMessage
		if json.Unmarshal(raw, &generic) != nil {
			return nil, ""
		}
		blocks = blocks[:0]
		for _, g := range generic {
			var b B
			if json.Unmarshal(g, &b) == nil {
				blocks = append(blocks, b)
			}
		}
		return blocks, ""
	}
	return nil, ""
}

// str is v when it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
}

// display is v as text: a string as is, anything else as JSON.
func display(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func esc(b *bytes.Buffer, s string) { b.WriteString(html.EscapeString(visible(s))) }

// classes maps what an entry claims to be onto the fixed set of class
// names the stylesheet knows.
var classes = map[string]bool{
	"message": true, "user": true, "assistant": true, "toolResult": true, "bashExecution": true,
	"custom": true, "branchSummary": true, "compactionSummary": true, "system": true,
	"thinking_level_change": true, "model_change": true, "compaction": true, "branch_summary": true,
	"custom_message": true, "label": true, "session_info": true, "usage": true, "context_edit": true,
}

func class(s string) string {
	if classes[s] {
		return s
	}
	return "other"
}

// Bounds on what one entry shows before it is folded away.
const (
	foldChars   = 2000
	foldLines   = 24
	maxShown    = 512 << 10 // an entry's text past this is cut, with a note
	maxImageB64 = 16 << 20  // base64 bytes of an image served inline (12 MiB decoded)
)

// entryCtx is what rendering one entry needs beyond its line.
type entryCtx struct {
	sid     string
	id      string // the entry's id as text
	node    string
	label   string
	results map[string]*resultRef  // tool results on the branch, by toolCallId
	images  func(id string) string // URL prefix of an entry's images; nil shows none
	// shown counts the bytes of the entry's text shown so far, against
	// limit (0: maxShown); a page sets a lower one once it is large.
	shown, limit int
}

// imgBase is the URL prefix of the entry's images, "" for none.
func (c *entryCtx) imgBase() string {
	if c.images == nil {
		return ""
	}
	return c.images(c.id)
}

type resultRef struct {
	id  string
	doc *doc
}

// entry renders one entry as an <article>.
func (m *markdown) entry(b *bytes.Buffer, raw []byte, c *entryCtx) {
	d, err := parseDoc(raw)
	if err != nil {
		m.article(b, c, "other", "unreadable line", "", func() {
			b.WriteString(`<pre class="plain">`)
			preText(b, visible(c.clip(string(raw))))
			b.WriteString(`</pre>`)
		})
		return
	}
	ts := when(d.Timestamp)
	switch d.Type {
	case "message":
		if d.Message == nil {
			m.article(b, c, "message", "message", ts, func() {})
			return
		}
		m.message(b, d.Message, c, ts)
	case "compaction":
		m.article(b, c, "compaction", "compaction", ts, func() {
			b.WriteString(`<div class="card">`)
			if n, ok := d.TokensBefore.(float64); ok {
				fmt.Fprintf(b, `<div class="note">context compacted from %s tokens</div>`, html.EscapeString(tokens(n)))
			}
			m.render(b, c.clip(display(d.Summary)))
			b.WriteString(`</div>`)
		})
	case "branch_summary":
		m.article(b, c, "branch_summary", "branch summary", ts, func() {
			b.WriteString(`<div class="card">`)
			if f := display(d.FromID); f != "" {
				b.WriteString(`<div class="note">from `)
				esc(b, f)
				b.WriteString(`</div>`)
			}
			m.render(b, c.clip(display(d.Summary)))
			b.WriteString(`</div>`)
		})
	case "custom_message":
		m.article(b, c, "custom_message", "custom: "+display(d.CustomType), ts, func() {
			blocks, text := parseBlocks(d.Content)
			m.blocks(b, blocks, text, c, false)
		})
	case "custom":
		m.article(b, c, "custom", "custom: "+display(d.CustomType), ts, func() {
			if len(d.Data) > 0 {
				m.folded(b, c, "data", prettyJSON(d.Data), true)
			}
		})
	case "model_change":
		m.article(b, c, "model_change", "model → "+display(d.Provider)+"/"+display(d.ModelID), ts, nil)
	case "thinking_level_change":
		m.article(b, c, "thinking_level_change", "thinking → "+display(d.ThinkingLevel), ts, nil)
	case "label":
		m.article(b, c, "label", "label "+display(d.TargetID)+": "+display(d.Label), ts, nil)
	case "session_info":
		m.article(b, c, "session_info", "name: "+display(d.Name), ts, nil)
	case "context_edit":
		m.contextEdit(b, d, c, ts)
	case "usage":
		title := "usage"
		if k := display(d.Kind); k != "" {
			title += " · " + k
		}
		if p, mo := display(d.Provider), display(d.Model); p != "" || mo != "" {
			title += " · " + modelName(p, mo)
		}
		m.article(b, c, "usage", title, ts, func() {
			if note := display(d.Note); note != "" {
				b.WriteString(`<div class="note">`)
				esc(b, c.clip(note))
				b.WriteString(`</div>`)
			}
			if len(d.Usage) > 0 {
				m.folded(b, c, "usage", prettyJSON(d.Usage), true)
			}
		})
	default:
		m.article(b, c, "other", d.Type, ts, func() {
			m.folded(b, c, "line", prettyJSON(raw), true)
		})
	}
}

// article wraps an entry's body with its header: type, time, node, label
// and the deep link.
func (m *markdown) article(b *bytes.Buffer, c *entryCtx, cls, title, ts string, body func()) {
	fmt.Fprintf(b, `<article class="entry t-%s" id="e-%s" data-id="%s"><header>`, class(cls), html.EscapeString(c.id), html.EscapeString(c.id))
	fmt.Fprintf(b, `<a class="anchor" href="#e-%s" title="link to this entry">#</a> <span class="title">`, html.EscapeString(url.PathEscape(c.id)))
	esc(b, clipLine(title))
	b.WriteString(`</span>`)
	if c.label != "" {
		b.WriteString(` <span class="label">`)
		esc(b, clipLine(c.label))
		b.WriteString(`</span>`)
	}
	b.WriteString(` <span class="meta">`)
	esc(b, ts)
	if c.node != "" {
		b.WriteString(` · `)
		esc(b, c.node)
	}
	b.WriteString(`</span></header>`)
	if body != nil {
		b.WriteString(`<div class="body">`)
		body()
		b.WriteString(`</div>`)
	}
	b.WriteString(`</article>`)
}

func (m *markdown) message(b *bytes.Buffer, msg *message, c *entryCtx, ts string) {
	role := display(msg.Role)
	title := role
	switch role {
	case "assistant":
		if mod := display(msg.Model); mod != "" {
			title += " · " + mod
		}
		if n, ok := usageTokens(msg.Usage); ok {
			title += " · " + tokens(n) + " tokens"
		}
	case "toolResult":
		title = "result: " + display(msg.ToolName)
	case "custom":
		title = "custom: " + display(msg.CustomType)
	}
	m.article(b, c, role, title, ts, func() {
		switch role {
		case "bashExecution":
			m.bash(b, msg, c)
			return
		case "toolResult":
			m.result(b, msg, c)
			return
		case "branchSummary", "compactionSummary":
			b.WriteString(`<div class="card">`)
			m.render(b, c.clip(display(msg.Summary)))
			b.WriteString(`</div>`)
			return
		}
		blocks, text := parseBlocks(msg.Content)
		m.blocks(b, blocks, text, c, role == "assistant")
		if e := display(msg.ErrorMessage); e != "" {
			b.WriteString(`<div class="error">`)
			esc(b, c.clip(e))
			b.WriteString(`</div>`)
		}
	})
}

// blocks renders content: text as markdown, thinking folded, tool calls
// with their results, images by URL.
func (m *markdown) blocks(b *bytes.Buffer, blocks []block, text string, c *entryCtx, assistant bool) {
	if text != "" {
		m.render(b, c.clip(text))
	}
	img := 0
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			m.render(b, c.clip(display(bl.Text)))
		case "thinking":
			b.WriteString(`<details class="thinking"><summary>thinking</summary>`)
			m.render(b, c.clip(display(bl.Thinking)))
			b.WriteString(`</details>`)
		case "toolCall":
			m.toolCall(b, bl, c)
		case "image":
			m.image(b, bl, c, img)
			img++
		default:
			raw, _ := json.Marshal(bl)
			m.folded(b, c, bl.Type, string(raw), true)
		}
	}
}

func (m *markdown) image(b *bytes.Buffer, bl block, c *entryCtx, n int) {
	data := str(bl.Data)
	mime := imageType(str(bl.MimeType))
	base := c.imgBase()
	switch {
	case base == "":
		b.WriteString(`<div class="note">[image]</div>`)
	case mime == "" && str(bl.MimeType) == "":
		b.WriteString(`<div class="note">[image without a type, not shown]</div>`)
	case mime == "":
		b.WriteString(`<div class="note">[image of type `)
		esc(b, clipLine(display(bl.MimeType)))
		b.WriteString(` not shown]</div>`)
	case len(data) > maxImageB64:
		fmt.Fprintf(b, `<div class="note">[image of %s not shown: over %s]</div>`, size(int64(base64.StdEncoding.DecodedLen(len(data)))), size(maxImageB64/4*3))
	default:
		fmt.Fprintf(b, `<a class="img" href="%s%d"><img loading="lazy" decoding="async" alt="image %d" src="%s%d"></a>`,
			html.EscapeString(base), n, n+1, html.EscapeString(base), n)
	}
}

// imageType is the Content-Type an image is served with: raster types
// only (an SVG can hold script).
func imageType(mime string) string {
	switch strings.ToLower(strings.TrimSpace(mime)) {
	case "image/png":
		return "image/png"
	case "image/jpeg", "image/jpg":
		return "image/jpeg"
	case "image/gif":
		return "image/gif"
	case "image/webp":
		return "image/webp"
	}
	return ""
}

func (m *markdown) toolCall(b *bytes.Buffer, bl block, c *entryCtx) {
	name := display(bl.Name)
	var args map[string]any
	json.Unmarshal(bl.Arguments, &args)
	b.WriteString(`<div class="tool"><div class="tool-head"><span class="tool-name">`)
	esc(b, clipLine(name))
	b.WriteString(`</span> `)
	switch name {
	case "bash":
		b.WriteString(`<code class="cmd">$ `)
		esc(b, clipLine(display(args["command"])))
		b.WriteString(`</code></div>`)
	case "edit":
		esc(b, clipLine(display(args["path"])))
		b.WriteString(`</div>`)
		m.diff(b, args, c)
	case "read", "ls", "find", "grep":
		esc(b, clipLine(display(args["path"])+" "+display(args["pattern"])))
		b.WriteString(`</div>`)
	case "write":
		esc(b, clipLine(display(args["path"])))
		b.WriteString(`</div>`)
		m.folded(b, c, "content", display(args["content"]), true)
	default:
		b.WriteString(`</div>`)
		if len(bl.Arguments) > 0 {
			m.folded(b, c, "arguments", prettyJSON(bl.Arguments), false)
		}
	}
	if r := c.results[display(bl.ID)]; r != nil && r.doc.Message != nil {
		fmt.Fprintf(b, `<div class="paired" id="e-%s" data-id="%s">`, html.EscapeString(r.id), html.EscapeString(r.id))
		rc := *c
		rc.id = r.id
		m.result(b, r.doc.Message, &rc)
		b.WriteString(`</div>`)
	}
	b.WriteString(`</div>`)
}

// diff shows an edit's replacements as removed and added lines.
func (m *markdown) diff(b *bytes.Buffer, args map[string]any, c *entryCtx) {
	type edit struct{ old, new string }
	var edits []edit
	if o, ok := args["oldText"].(string); ok {
		edits = append(edits, edit{o, str(args["newText"])})
	}
	if list, ok := args["edits"].([]any); ok {
		for _, e := range list {
			if e, ok := e.(map[string]any); ok {
				edits = append(edits, edit{str(e["oldText"]), str(e["newText"])})
			}
		}
	}
	for _, e := range edits {
		b.WriteString(`<pre class="diff">`)
		diffLines(b, c, "del", "- ", e.old)
		diffLines(b, c, "add", "+ ", e.new)
		b.WriteString(`</pre>`)
	}
}

// lineMarkup is what a diff line's markup costs against what an entry may
// show: an edit of a million empty lines is 27 MB of it.
const lineMarkup = 24

// diffLines writes text's lines marked as removed or added, as far as the
// entry may still show them.
func diffLines(b *bytes.Buffer, c *entryCtx, cls, mark, text string) {
	for rest := text; ; {
		l, more, found := strings.Cut(rest, "\n")
		room := c.room() - lineMarkup
		cut := len(l) > room
		if cut {
			l = strings.ToValidUTF8(l[:max(room, 0)], "")
		}
		if !cut || room > 0 {
			b.WriteString(`<span class="` + cls + `">` + mark)
			preText(b, visible(l))
			b.WriteString("</span>\n")
		}
		if cut {
			c.shown = c.max()
			fmt.Fprintf(b, "… (%s more not shown)\n", size(int64(len(rest)-max(room, 0))))
			return
		}
		c.shown += len(l) + lineMarkup
		if !found {
			return
		}
		rest = more
	}
}

func (m *markdown) result(b *bytes.Buffer, msg *message, c *entryCtx) {
	blocks, text := parseBlocks(msg.Content)
	var out strings.Builder
	out.WriteString(text)
	img := 0
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			if out.Len() > 0 {
				out.WriteByte('\n')
			}
			out.WriteString(display(bl.Text))
		case "image":
			m.image(b, bl, c, img)
			img++
		}
	}
	cls := "result"
	if msg.IsError == true {
		cls = "result error"
	}
	b.WriteString(`<div class="` + cls + `">`)
	m.folded(b, c, "output", out.String(), false)
	b.WriteString(`</div>`)
}

func (m *markdown) bash(b *bytes.Buffer, msg *message, c *entryCtx) {
	b.WriteString(`<div class="tool"><div class="tool-head"><code class="cmd">$ `)
	esc(b, clipLine(display(msg.Command)))
	b.WriteString(`</code>`)
	if code := display(msg.ExitCode); code != "" {
		b.WriteString(` <span class="note">exit `)
		esc(b, code)
		b.WriteString(`</span>`)
	}
	b.WriteString(`</div>`)
	m.folded(b, c, "output", display(msg.Output), false)
	b.WriteString(`</div>`)
}

// contextEdit shows what a context_edit changes (pi 1.6): the entry it
// targets, linked, and what the model is given instead, or that the entry
// is taken out of the context. The stored entry itself is never changed.
func (m *markdown) contextEdit(b *bytes.Buffer, d *doc, c *entryCtx, ts string) {
	target := display(d.TargetID)
	removed := len(d.Replacement) == 0 || string(d.Replacement) == "null"
	title := "context edit of " + target
	if removed {
		title = "context edit: " + target + " taken out of the context"
	}
	m.article(b, c, "context_edit", title, ts, func() {
		if target != "" {
			fmt.Fprintf(b, `<div class="note">edits <a href="#e-%s">`, html.EscapeString(url.PathEscape(target)))
			esc(b, clipLine(target))
			b.WriteString(`</a>`)
			if !removed {
				b.WriteString(`: the model is given this instead`)
			}
			b.WriteString(`</div>`)
		}
		if removed {
			return
		}
		var r struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(d.Replacement, &r) != nil {
			m.folded(b, c, "replacement", prettyJSON(d.Replacement), true)
			return
		}
		blocks, text := parseBlocks(r.Content)
		m.blocks(b, blocks, text, c, false)
	})
}

// folded shows text preformatted, inside a closed <details> when it is
// long (or always when closed is set).
func (m *markdown) folded(b *bytes.Buffer, c *entryCtx, what, text string, closed bool) {
	if text == "" {
		return
	}
	// The lines counted are the text's, not only those shown: a clipped
	// output of a thousand lines is not "19 lines".
	lines := strings.Count(text, "\n") + 1
	text = c.clip(text)
	if !closed && len(text) <= foldChars && lines <= foldLines {
		b.WriteString(`<pre class="plain">`)
		preText(b, visible(text))
		b.WriteString(`</pre>`)
		return
	}
	first, _, _ := strings.Cut(text, "\n")
	fmt.Fprintf(b, `<details class="fold"><summary>%s · %d lines · `, html.EscapeString(what), lines)
	esc(b, clipLine(first))
	b.WriteString(`</summary><pre class="plain">`)
	preText(b, visible(text))
	b.WriteString(`</pre></details>`)
}

// clip cuts s to what the entry may still show, saying how much is not
// shown: an entry's text is bounded as a whole, however many blocks, edits
// or lines it holds, since a page's HTML is held whole in memory.
func (c *entryCtx) clip(s string) string {
	room := c.room()
	if len(s) <= room {
		c.shown += len(s)
		return s
	}
	c.shown = c.max()
	return strings.ToValidUTF8(s[:room], "") + fmt.Sprintf("\n… (%s more not shown)", size(int64(len(s)-room)))
}

// max is how many bytes of text the entry shows at most.
func (c *entryCtx) max() int {
	if c.limit > 0 {
		return min(c.limit, maxShown)
	}
	return maxShown
}

// room is how many more bytes of text the entry may show.
func (c *entryCtx) room() int { return max(0, c.max()-c.shown) }

// clipLine is the start of s's first line, for headers and summaries.
func clipLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return clipTo(s, 160)
}

// clipTo is s, its bidi controls shown, cut to n bytes with an ellipsis.
func clipTo(s string, n int) string {
	s = visible(s)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

func prettyJSON(raw []byte) string {
	var out bytes.Buffer
	if len(raw) > maxShown || json.Indent(&out, raw, "", "  ") != nil {
		return string(raw)
	}
	return out.String()
}

func usageTokens(raw json.RawMessage) (float64, bool) {
	var u struct {
		TotalTokens any `json:"totalTokens"`
	}
	if json.Unmarshal(raw, &u) != nil {
		return 0, false
	}
	n, ok := u.TotalTokens.(float64)
	return n, ok
}

// when formats an entry timestamp (ISO string or ms) for a header.
func when(v any) string {
	var t time.Time
	switch v := v.(type) {
	case string:
		p, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return clipLine(v)
		}
		t = p
	case float64:
		if math.IsNaN(v) || math.Abs(v) > 8.64e15 {
			return ""
		}
		t = time.UnixMilli(int64(v))
	default:
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func tokens(n float64) string {
	switch {
	case n >= 1e6:
		return strconv.FormatFloat(n/1e6, 'f', 1, 64) + "M"
	case n >= 1e4:
		return strconv.FormatFloat(n/1e3, 'f', 0, 64) + "k"
	}
	return strconv.FormatFloat(n, 'f', -1, 64)
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
