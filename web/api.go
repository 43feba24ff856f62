package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/session"
)

// listRow is one session of the list, with short keys: 10k of them are
// one answer the page filters and sorts itself.
type listRow struct {
	ID string `json:"id"`
	// Shown is the id as the view shows it where it differs (its bidi
	// controls made visible: an id of "x\u202eyz" read "xzy"); ID stays
	// exact for the links.
	Shown   string   `json:"is,omitempty"`
	Name    string   `json:"n,omitempty"`
	Cwd     string   `json:"c,omitempty"`
	First   string   `json:"f,omitempty"` // first user message (the catalog's, bounded)
	Nodes   []string `json:"m"`
	Updated float64  `json:"u"`
	Entries int      `json:"e"`
	Tokens  float64  `json:"t"`
	Cost    float64  `json:"$"`
	// State lists what is unusual: forked, deleted, collision, error,
	// migrated.
	State []string `json:"s,omitempty"`
}

// listAnswer is the list's answer: the newest limit sessions of the
// catalog (newest first), all of them when limit is negative.
type listAnswer struct {
	Node     string    `json:"node"`
	Search   bool      `json:"search"`
	Total    int       `json:"total"` // sessions in the catalog, also when limited
	Sessions []listRow `json:"sessions"`
	// Filling: the first messages are still being read back after the
	// daemon's start; the page asks again.
	Filling bool `json:"filling,omitempty"`
}

// filler is the part of a Source that says the first messages are still
// being read back (projection.Worker).
type filler interface{ FillingFirstMessages() bool }

var _ filler = (*projection.Worker)(nil)

// maxListIDs bounds the sessions one list answer is asked for by id.
const maxListIDs = 256

// maxPath bounds a path the view shows (a cwd, a parent session's file):
// a session's name and paths are a teammate's, of any length.
const maxPath = 1 << 10

func (s *Server) listAnswer(cat []projection.CatalogEntry, limit int) listAnswer {
	total := len(cat)
	if limit >= 0 && limit < len(cat) {
		cat = cat[:limit]
	}
	rows := make([]listRow, len(cat))
	for i, c := range cat {
		rows[i] = listRow{ID: c.SessionID, Shown: shownID(c.SessionID), Name: clipLine(c.Name), Cwd: clipTo(c.Cwd, maxPath), First: visible(c.FirstMessage), Nodes: c.Nodes, Updated: c.UpdatedMs,
			Entries: c.Entries, Tokens: c.Tokens, Cost: c.Cost, State: state(c)}
	}
	f, ok := s.opts.Source.(filler)
	return listAnswer{Node: s.opts.Node, Search: s.opts.Search != nil, Total: total, Sessions: rows, Filling: ok && f.FillingFirstMessages()}
}

func (s *Server) serveSessions(w http.ResponseWriter, r *http.Request) {
	cat, err := s.opts.Source.Catalog(r.Context())
	if err != nil {
		http.Error(w, "web: sessions: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	// ?id=A&id=B: those sessions alone (what changed since the page's
	// last answer), with the whole list's total; ?limit=N: the newest N
	// alone (what the page draws first).
	if ids := r.URL.Query()["id"]; len(ids) > 0 {
		if len(ids) > maxListIDs {
			http.Error(w, fmt.Sprintf("web: sessions: at most %d ids at once", maxListIDs), http.StatusBadRequest)
			return
		}
		want := make(map[string]bool, len(ids))
		for _, id := range ids {
			want[id] = true
		}
		some := make([]projection.CatalogEntry, 0, len(ids))
		for _, c := range cat {
			if want[c.SessionID] {
				some = append(some, c)
			}
		}
		ans := s.listAnswer(some, -1)
		ans.Total = len(cat)
		writeJSON(w, ans)
		return
	}
	writeJSON(w, s.listAnswer(cat, intParam(r, "limit")))
}

func state(c projection.CatalogEntry) []string {
	var st []string
	if c.Forked {
		st = append(st, "forked")
	}
	if c.Deleted {
		st = append(st, "deleted")
	}
	if len(c.Collisions) > 0 {
		st = append(st, "collision")
	}
	if c.Error != "" {
		st = append(st, "error")
	}
	if c.MigratedBy != "" {
		st = append(st, "migrated")
	}
	return st
}

// treeRow is one entry of the tree panel, in pi's tree order. Depth grows
// only where the tree branches, so a long chat stays flat.
type treeRow struct {
	ID     string  `json:"id"`
	Parent string  `json:"p,omitempty"`
	Depth  int     `json:"d"`
	Type   string  `json:"t"`
	Text   string  `json:"x,omitempty"`
	Label  string  `json:"l,omitempty"`
	Time   float64 `json:"ts,omitempty"`
	// Target is a live label entry's target (sse.go): the page shows the
	// label on it.
	Target string `json:"g,omitempty"`
}

type modelUsage struct {
	Model  string  `json:"model"`
	Count  int     `json:"messages"`
	Tokens float64 `json:"tokens"`
	Cost   float64 `json:"cost"`
}

// sessionView is the session page's data but for the tree panel and the
// usage by model (treeView): what the page draws first.
type sessionView struct {
	ID        string   `json:"id"`
	IDShown   string   `json:"idShown,omitempty"` // as listRow.Shown
	Name      string   `json:"name,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
	Parent    string   `json:"parent,omitempty"` // the file it was forked from
	Nodes     []string `json:"nodes"`
	Entries   int      `json:"entries"`
	Tokens    float64  `json:"tokens"`
	Cost      float64  `json:"cost"`
	State     []string `json:"state,omitempty"`
	Error     string   `json:"error,omitempty"`
	Rules     string   `json:"rules,omitempty"`
	Leaf      string   `json:"leaf"`     // pi's leaf
	Selected  string   `json:"selected"` // the leaf of the branch rendered
	Resume    string   `json:"resume,omitempty"`
	ResumeErr string   `json:"resumeError,omitempty"`
	Pos       string   `json:"pos"` // where the page's live events resume
	Truncated bool     `json:"truncated,omitempty"`
	branchWindow
}

func (s *Server) serveSession(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	tm := newTimings()
	c := s.catalogEntry(r.Context(), sid)
	tm.mark("catalog")
	snap, ok := s.snapshot(w, r, sid, c)
	if !ok {
		return
	}
	tm.mark("snapshot")
	v := sessionView{ID: sid, IDShown: shownID(sid), Nodes: []string{}}
	if c != nil {
		v.Name, v.Cwd, v.Nodes, v.Entries, v.Tokens, v.Cost, v.State, v.Error, v.Rules =
			clipLine(c.Name), clipTo(c.Cwd, maxPath), c.Nodes, c.Entries, c.Tokens, c.Cost, state(*c), c.Error, c.Rules
		v.Parent = clipTo(c.ParentSession, maxPath)
		if s.opts.Locate != nil {
			if p, err := s.opts.Locate(r.Context(), *c); err != nil {
				v.ResumeErr = err.Error()
			} else if p != "" {
				v.Resume = "pi --session " + shellQuote(p)
			} else {
				v.ResumeErr = "no copy of this session on this machine"
			}
		}
	}
	st := newSessionText(snap)
	v.Leaf = idText(snap.Tree.Leaf())
	v.Pos = formatPos(snap.Src)
	v.Truncated = snap.Truncated
	v.Selected = r.URL.Query().Get("leaf")
	if _, ok := snap.Tree.Find(v.Selected); !ok {
		v.Selected = v.Leaf
	}
	path := st.path(v.Selected)
	start, end := window(st, path, r.URL.Query().Get("at"), -1, -1)
	v.branchWindow = s.branchHTML(st, path, start, end)
	tm.mark("branch")
	tm.writeJSON(w, v)
}

func (s *Server) serveBranch(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	snap, ok := s.snapshot(w, r, sid, s.catalogEntry(r.Context(), sid))
	if !ok {
		return
	}
	leaf := r.URL.Query().Get("leaf")
	if _, ok := snap.Tree.Find(leaf); !ok {
		http.Error(w, "web: branch: no entry "+strconv.Quote(leaf), http.StatusNotFound)
		return
	}
	st := newSessionText(snap)
	path := st.path(leaf)
	start, end := window(st, path, r.URL.Query().Get("at"), intParam(r, "start"), intParam(r, "end"))
	writeJSON(w, struct {
		Selected string `json:"selected"`
		Pos      string `json:"pos"`
		branchWindow
	}{leaf, formatPos(snap.Src), s.branchHTML(st, path, start, end)})
}

// intParam is a non-negative integer query parameter, -1 when absent or
// not one.
func intParam(r *http.Request, name string) int {
	n, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// snapshot reads the session (or takes the kept snapshot its catalog entry
// c shows is still current: cache.go; nil: not in the catalog), answering
// the request itself on failure.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request, sid string, c *projection.CatalogEntry) (*projection.Snapshot, bool) {
	if err := eventlog.CheckSID(sid); err != nil {
		http.Error(w, "web: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	if c != nil {
		if snap := s.current(*c); snap != nil {
			return snap, true
		}
	}
	snap, err := s.read(r.Context(), sid)
	if errors.Is(err, projection.ErrUnknownSession) {
		http.Error(w, fmt.Sprintf("web: no session %q on this machine", sid), http.StatusNotFound)
		return nil, false
	}
	if err != nil {
		http.Error(w, "web: "+err.Error(), http.StatusServiceUnavailable)
		return nil, false
	}
	return snap, true
}

// read reads the session from the source, kept for the requests that
// follow (cache.go). A request for a session being read already waits for
// that read: a page's data and its tree come together and need the same
// session. The read is at least as new as the wait's start, and the page
// follows live entries from the snapshot's own position.
func (s *Server) read(ctx context.Context, sid string) (*projection.Snapshot, error) {
	s.mu.Lock()
	f := s.reading[sid]
	if f == nil {
		// errReadPanicked until the read returns: a read that panics
		// (net/http recovers it) is still ended, or every later request
		// for the session would wait for it until its own deadline.
		f = &flight{done: make(chan struct{}), err: errReadPanicked}
		s.reading[sid] = f
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.reading, sid)
			if f.err == nil {
				s.keep(cachedSnap{sid: sid, snap: f.snap})
			}
			s.mu.Unlock()
			close(f.done)
		}()
		f.snap, f.err = s.opts.Source.Snapshot(ctx, sid, s.opts.MaxSessionBytes)
		return f.snap, f.err
	}
	f.waiting++
	s.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("snapshot: %w", ctx.Err())
	}
	if f.err != nil && ctx.Err() == nil {
		// The other request's failure may be its own (it went away):
		// this one reads for itself.
		return s.opts.Source.Snapshot(ctx, sid, s.opts.MaxSessionBytes)
	}
	return f.snap, f.err
}

// errReadPanicked is the outcome of a read that panicked, for the requests
// that waited for it (they read for themselves).
var errReadPanicked = errors.New("web: snapshot: the read panicked")

// catalogEntry is sid's catalog entry, nil when the catalog has none (or
// cannot be read). It copies the whole catalog: a request looks it up once.
func (s *Server) catalogEntry(ctx context.Context, sid string) *projection.CatalogEntry {
	cat, err := s.opts.Source.Catalog(ctx)
	if err != nil {
		return nil
	}
	for i := range cat {
		if cat[i].SessionID == sid {
			return &cat[i]
		}
	}
	return nil
}

// contextJSON computes the session's context as `pisyncd context --json`
// prints it, within the view's limit; on failure it has answered already.
func (s *Server) contextJSON(w http.ResponseWriter, r *http.Request) (sid string, body []byte, ok bool) {
	sid = r.PathValue("sid")
	if err := eventlog.CheckSID(sid); err != nil {
		http.Error(w, "web: "+err.Error(), http.StatusBadRequest)
		return "", nil, false
	}
	var out bytes.Buffer
	lw := &limitWriter{w: &out, n: s.opts.MaxSessionBytes}
	if err := s.opts.Source.WriteContext(r.Context(), lw, sid, r.URL.Query().Get("leaf"), s.opts.Rules); err != nil {
		code := http.StatusUnprocessableEntity
		if errors.Is(err, projection.ErrUnknownSession) {
			code = http.StatusNotFound
		}
		http.Error(w, "web: context: "+err.Error(), code)
		return "", nil, false
	}
	return sid, out.Bytes(), true
}

// serveContext answers the session's context exactly as `pisyncd context
// --json` prints it (the control socket's /context).
func (s *Server) serveContext(w http.ResponseWriter, r *http.Request) {
	_, body, ok := s.contextJSON(w, r)
	if !ok {
		return
	}
	jsonHeaders(w)
	w.Write(append(body, '\n'))
}

// serveContextView renders the context's messages as the page shows them.
func (s *Server) serveContextView(w http.ResponseWriter, r *http.Request) {
	sid, body, ok := s.contextJSON(w, r)
	if !ok {
		return
	}
	var c struct {
		Rules    string            `json:"rules"`
		IDs      []json.RawMessage `json:"contextEntryIds"`
		Messages []json.RawMessage `json:"messages"`
		Model    json.RawMessage   `json:"model"`
		Thinking json.RawMessage   `json:"thinkingLevel"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		http.Error(w, "web: context: "+err.Error(), http.StatusInternalServerError)
		return
	}
	// A window of the messages, as the history's: the last pageEntries
	// unless start and end ask for earlier ones. A context of thousands
	// of messages rendered whole froze the browser for seconds.
	n := len(c.Messages)
	start, end := pageWindow(n, intParam(r, "start"), intParam(r, "end"))
	var b bytes.Buffer
	for i := start; i < end; i++ {
		raw := c.Messages[i]
		var msg message
		json.Unmarshal(raw, &msg)
		ec := &entryCtx{sid: sid, id: "ctx-" + strconv.Itoa(i), limit: pageLimit(b.Len())}
		s.md.message(&b, &msg, ec, when(timestampOf(raw)))
	}
	writeJSON(w, struct {
		Rules    string          `json:"rules"`
		Entries  int             `json:"entries"`
		Messages int             `json:"messages"`
		Start    int             `json:"start"`
		End      int             `json:"end"`
		Model    json.RawMessage `json:"model,omitempty"`
		Thinking json.RawMessage `json:"thinkingLevel,omitempty"`
		HTML     string          `json:"html"`
	}{c.Rules, len(c.IDs), n, start, end, c.Model, c.Thinking, b.String()})
}

func timestampOf(raw json.RawMessage) any {
	var t struct {
		Timestamp any `json:"timestamp"`
	}
	json.Unmarshal(raw, &t)
	return t.Timestamp
}

// serveImage serves image n of an entry's content, decoded, with a raster
// type only, never stored by the browser: an erased session's images must
// not outlive it in a disk cache. Answers are kept (images.go).
func (s *Server) serveImage(w http.ResponseWriter, r *http.Request) {
	sid, id := r.PathValue("sid"), r.PathValue("entry")
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 0 {
		http.Error(w, "web: image: bad index", http.StatusBadRequest)
		return
	}
	var snap *projection.Snapshot
	c := s.catalogEntry(r.Context(), sid)
	if c != nil {
		// A kept snapshot, or a kept answer, only of a session still
		// known: an erased session's images are gone with it.
		snap = s.recall(sid, id)
	}
	slot := false
	if snap == nil {
		if !s.takeRead(r.Context()) {
			return // the client went
		}
		slot = true
		defer s.doneRead() // the snapshot is held until the image is out
		var ok bool
		if snap, ok = s.snapshot(w, r, sid, c); !ok {
			return
		}
	}
	i, ok := snap.Tree.Find(id)
	if !ok {
		http.Error(w, "web: image: no entry", http.StatusNotFound)
		return
	}
	ref := snap.Tree.Entry(i).Ref
	raw, ok := snap.Line(ref)
	if !ok {
		http.Error(w, "web: image: entry not loaded", http.StatusNotFound)
		return
	}
	k := imageKey{sid: sid, ref: ref, n: n}
	if c != nil {
		if a, ok := s.keptImage(k); ok {
			a.write(w)
			return
		}
	}
	if !slot {
		if !s.takeRead(r.Context()) {
			return
		}
		defer s.doneRead()
		if a, ok := s.keptImage(k); ok { // found by a request it waited for
			a.write(w)
			return
		}
	}
	a := findImage(raw, n)
	if c != nil {
		s.keepImage(k, a)
	}
	a.write(w)
}

// imageBlock finds the n-th image block of an entry, counted as the
// renderer counts them.
func imageBlock(raw []byte, n int) (block, bool) {
	d, err := parseDoc(raw)
	if err != nil {
		return block{}, false
	}
	content := d.Content
	if d.Message != nil {
		content = d.Message.Content
	}
	blocks, _ := parseBlocks(content)
	for _, bl := range blocks {
		if bl.Type == "image" {
			if n == 0 {
				return bl, true
			}
			n--
		}
	}
	return block{}, false
}

// formatPos writes stream positions as the events' ids carry them:
// "PI_LOCAL:12,PI_ALL:5", streams sorted.
func formatPos(src projection.Src) string {
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(src[k], 10))
	}
	return b.String()
}

// parsePos reads a position written by formatPos; only the daemon's
// streams are accepted.
func parsePos(s string) (projection.Src, error) {
	src := projection.Src{}
	if s == "" {
		return src, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, seq, ok := strings.Cut(part, ":")
		if !ok || (name != eventlog.LocalStream && name != eventlog.AllStream) {
			return nil, errors.New("position: want STREAM:SEQ[,STREAM:SEQ] of PI_LOCAL and PI_ALL")
		}
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil {
			return nil, errors.New("position: bad sequence " + strconv.Quote(seq))
		}
		src[name] = n
	}
	return src, nil
}

// shellQuote quotes a path for a POSIX shell when it needs it.
func shellQuote(p string) string {
	if p != "" && strings.IndexFunc(p, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ':' || r == '@' || r == ',' ||
			r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return p
	}
	if strings.IndexFunc(p, func(r rune) bool { return !unicode.IsPrint(r) || r == utf8.RuneError }) >= 0 {
		return ansiQuote(p)
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// ansiQuote quotes p as bash and zsh read $'…': a character that is not
// printable (a bidi control, a newline, an escape) is written as its code,
// so the command shows as it runs and runs on the same path when pasted. A
// path holds what a teammate's cwd held (the replica's folder is named
// from it), and a bidi control in single quotes showed the command
// reversed (a web probe, 2026-12-07).
func ansiQuote(p string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRuneInString(p[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, p[i])
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case !unicode.IsPrint(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	b.WriteByte('\'')
	return b.String()
}

func idText(id session.ID) string {
	if s, ok := id.String(); ok {
		return s
	}
	return ""
}

func writeJSON(w http.ResponseWriter, v any) {
	jsonHeaders(w)
	newEncoder(w).Encode(v)
}

// newEncoder encodes an answer without escaping '<', '>' and '&': a JSON
// answer (nosniff) is never read as HTML, and the escapes made the
// rendered HTML it carries half as large again (a '<' in a session, four
// bytes in the HTML, took nine).
func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// jsonHeaders are the headers of every JSON answer: never cached, since a
// session changes as it is read.
func jsonHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
}

// limitWriter fails a write past n bytes.
type limitWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, errors.New("web: context larger than the view holds")
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}

// shownID is a session id as the view shows it, "" when that is the id
// itself: its bidi controls made visible.
func shownID(id string) string {
	if v := visible(id); v != id {
		return v
	}
	return ""
}
