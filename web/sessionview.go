package web

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/pisyncd/pisyncd/projection"
)

// sessionText is a snapshot's entries as the page shows them.
type sessionText struct {
	snap   *projection.Snapshot
	docs   []*doc // by entry position; nil until parsed or unreadable
	parsed []bool
	labels map[string]string
}

func newSessionText(snap *projection.Snapshot) *sessionText {
	n := snap.Tree.Len()
	return &sessionText{snap: snap, docs: make([]*doc, n), parsed: make([]bool, n), labels: labelsOf(snap)}
}

// labelsOf is the label of each labelled entry, by id.
func labelsOf(snap *projection.Snapshot) map[string]string {
	labels := map[string]string{}
	for id, raw := range snap.Tree.Labels() {
		var l string
		if json.Unmarshal(raw, &l) == nil {
			labels[id] = clipLine(l)
		}
	}
	return labels
}

// doc is entry i parsed, nil when its line is not loaded or unreadable.
func (st *sessionText) doc(i int) *doc {
	if !st.parsed[i] {
		st.parsed[i] = true
		if raw, ok := st.snap.Line(st.snap.Tree.Entry(i).Ref); ok {
			st.docs[i], _ = parseDoc(raw)
		}
	}
	return st.docs[i]
}

func (st *sessionText) id(i int) string { return idText(st.snap.Tree.Entry(i).ID) }

func snippet(s string) string {
	s = strings.Join(strings.Fields(visible(s)), " ")
	if len(s) > 100 {
		s = strings.ToValidUTF8(s[:100], "") + "…"
	}
	return s
}

// path is the branch from the root to entry id, as pi's getBranch walks
// it (parent by parent through the id index).
func (st *sessionText) path(id string) []int {
	t := st.snap.Tree
	i, ok := t.Find(id)
	if !ok {
		return nil
	}
	var p []int
	for len(p) <= t.Len() {
		p = append(p, i)
		parent, ok := t.Entry(i).ParentID.String()
		if !ok {
			break
		}
		j, ok := t.Find(parent)
		if !ok || j == i {
			break
		}
		i = j
	}
	for a, b := 0, len(p)-1; a < b; a, b = a+1, b-1 {
		p[a], p[b] = p[b], p[a]
	}
	return p
}

// pageEntries is how many entries of a branch one answer renders: a
// 10k-entry branch is sent a page at a time, the newest first, and the
// page asks for earlier ones as the reader scrolls up.
const pageEntries = 200

// branchWindow is the part of a branch one answer renders.
type branchWindow struct {
	Start int    `json:"start"` // position on the branch of the first entry rendered
	End   int    `json:"end"`   // after the last
	Total int    `json:"total"` // entries on the branch
	HTML  string `json:"html"`
}

// window picks the entries of path to render: [start, end) when asked,
// else the page around entry at, else the last page.
func window(st *sessionText, path []int, at string, start, end int) (int, int) {
	n := len(path)
	if at != "" && !(start >= 0 && end > start) {
		for k, i := range path {
			if st.id(i) == at {
				s := max(0, k-pageEntries/4)
				return s, min(n, s+pageEntries)
			}
		}
	}
	return pageWindow(n, start, end)
}

// pageWindow is the window of n items to render: [start, end) when asked, at
// most pageEntries of them, else the last pageEntries. The branch and the
// context's messages are sent so.
func pageWindow(n, start, end int) (int, int) {
	if start >= 0 && end > start {
		// start within n first: start+pageEntries overflowed for a start
		// near the largest int, and the page's slice panicked.
		start = min(start, n)
		return start, min(end, n, start+pageEntries)
	}
	return max(0, n-pageEntries), n
}

// Past pageFull bytes of a page's HTML, each further entry shows at most
// crowdedShown bytes of its text: a page of 200 entries of half a MiB of
// text each would be hundreds of MiB, held whole by the daemon and the
// browser.
const (
	pageFull     = 4 << 20
	crowdedShown = 8 << 10
)

// pageLimit is the limit of an entry's text (entryCtx.limit) on a page
// that holds n bytes of HTML before it.
func pageLimit(n int) int {
	if n > pageFull {
		return crowdedShown
	}
	return 0
}

// branchHTML renders entries [start, end) of the branch path, each tool
// result inside the call it answers when both are rendered.
func (s *Server) branchHTML(st *sessionText, path []int, start, end int) branchWindow {
	part := path[start:end]
	calls := map[string]bool{}
	results := map[string]*resultRef{}
	skip := map[int]bool{}
	for _, i := range part {
		d := st.doc(i)
		if d == nil || d.Type != "message" || d.Message == nil {
			continue
		}
		switch display(d.Message.Role) {
		case "assistant":
			blocks, _ := parseBlocks(d.Message.Content)
			for _, b := range blocks {
				if b.Type == "toolCall" {
					calls[display(b.ID)] = true
				}
			}
		case "toolResult":
			cid := display(d.Message.ToolCallID)
			if calls[cid] && results[cid] == nil {
				results[cid] = &resultRef{id: st.id(i), doc: d}
				skip[i] = true
			}
		}
	}
	sid := st.snap.Tree.SessionID()
	images := imagesOf(sid)
	var b bytes.Buffer
	for _, i := range part {
		if skip[i] {
			continue
		}
		id := st.id(i)
		ref := st.snap.Tree.Entry(i).Ref
		c := &entryCtx{sid: sid, id: id, node: st.snap.Node(ref), label: st.labels[id], results: results, images: images,
			limit: pageLimit(b.Len())}
		raw, ok := st.snap.Line(ref)
		if !ok {
			s.md.article(&b, c, "other", "entry not loaded (the session is larger than the view holds)", "", nil)
			continue
		}
		s.md.entry(&b, raw, c)
	}
	return branchWindow{Start: start, End: end, Total: len(path), HTML: b.String()}
}

// imagesOf gives the URL prefix of an entry's images in session sid.
func imagesOf(sid string) func(id string) string {
	return func(id string) string {
		return "/api/s/" + url.PathEscape(sid) + "/image/" + url.PathEscape(id) + "/"
	}
}
