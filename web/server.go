package web

import (
	"context"
	"embed"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/session"
)

// Source is what the view reads: the projection worker's catalog, session
// snapshots, contexts and live entries.
type Source interface {
	Catalog(ctx context.Context) ([]projection.CatalogEntry, error)
	Snapshot(ctx context.Context, sid string, maxBytes int64) (*projection.Snapshot, error)
	WriteContext(ctx context.Context, out io.Writer, sid, leaf string, mode session.RuleSet) error
	Tail(ctx context.Context, o projection.TailOptions, fn func(projection.TailEntry) error) error
	Positions(ctx context.Context) (projection.Src, error)
	ErasedBelow(sid string) projection.Src
}

var _ Source = (*projection.Worker)(nil)

// Locator finds this machine's copy of a session: the absolute path of the
// file `pi --session` should open here, or "" when there is none.
type Locator func(ctx context.Context, c projection.CatalogEntry) (string, error)

// Options configure the view.
type Options struct {
	Source Source
	// Node is this machine's node id.
	Node string
	// Rules is the rule set of the daemon's context (PISYNC_RULES), so
	// that the view's context equals `pisyncd context --json`.
	Rules session.RuleSet
	// Locate maps a session to its file here (the resume command); nil
	// leaves the command out.
	Locate Locator
	// Hosts are Host names the view answers to besides loopback names
	// and addresses (a name the user set up for this machine).
	Hosts []string
	// Token is the secret every request must carry (guard); "" makes a
	// random one (Server.Token).
	Token string
	// Search serves GET /api/search (package search); nil answers 503.
	Search http.Handler
	// MaxSessionBytes bounds the line bytes one page view holds
	// (default 64 MiB): past it entries show as not loaded.
	MaxSessionBytes int64
	// MaxReads bounds the requests that read and render a whole session
	// at once (default 2); more wait their turn. Each holds up to
	// MaxSessionBytes and several times that rendered: 24 of them at once
	// on a session of one 50 MB line took 2.5 GB, past any memory budget.
	MaxReads int
	// MaxStreams bounds the event streams open at once (default 64): each
	// holds a buffer of entries; past it a new one is refused (503).
	MaxStreams int
	// KeepFor is how long the snapshots kept for the pages that follow
	// one (cache.go) stay after their last use (default 2 minutes).
	KeepFor time.Duration
	Logger  *slog.Logger
}

//go:embed assets
var assets embed.FS

// Server is the view's http.Handler.
type Server struct {
	opts    Options
	token   string
	cookie  string // cookieValue(token)
	handler http.Handler
	md      *markdown
	log     *slog.Logger
	assets  *assetSet

	reads   chan struct{} // a slot for each whole-session request under way (Options.MaxReads)
	queued  atomic.Int64  // requests waiting for a slot
	streams chan struct{} // a slot for each open event stream (Options.MaxStreams)

	mu      sync.Mutex
	snaps   []cachedSnap       // newest first, at most snapCache
	images  []cachedImage      // answers to image requests, newest first (images.go)
	reading map[string]*flight // reads under way, by session
	forget  *time.Timer        // drops snaps once unused for KeepFor
}

// New returns the view over opts.Source.
func New(opts Options) (*Server, error) {
	if opts.Source == nil {
		return nil, errors.New("web: no source")
	}
	if opts.MaxSessionBytes <= 0 {
		opts.MaxSessionBytes = 64 << 20
	}
	if opts.MaxReads <= 0 {
		opts.MaxReads = 2
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 64
	}
	if opts.KeepFor <= 0 {
		opts.KeepFor = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, token: opts.Token, md: newMarkdown(), log: opts.Logger, reading: map[string]*flight{},
		reads: make(chan struct{}, opts.MaxReads), streams: make(chan struct{}, opts.MaxStreams)}
	if s.token == "" {
		t, err := NewToken()
		if err != nil {
			return nil, err
		}
		s.token = t
	}
	s.cookie = cookieValue(s.token)
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	if s.assets, err = loadAssets(static); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveList)
	mux.HandleFunc("GET /s/{sid}", s.page("session.html"))
	mux.Handle("GET /assets/", s.assets.serve(static))
	mux.HandleFunc("GET /api/sessions", s.serveSessions)
	mux.HandleFunc("GET /api/s/{sid}", s.oneRead(s.serveSession))
	mux.HandleFunc("GET /api/s/{sid}/tree", s.oneRead(s.serveTree))
	mux.HandleFunc("GET /api/s/{sid}/branch", s.oneRead(s.serveBranch))
	mux.HandleFunc("GET /api/s/{sid}/context", s.oneRead(s.serveContext))
	mux.HandleFunc("GET /api/s/{sid}/context/view", s.oneRead(s.serveContextView))
	mux.HandleFunc("GET /api/s/{sid}/image/{entry}/{n}", s.serveImage)
	mux.HandleFunc("GET /api/events", s.serveEvents)
	mux.HandleFunc("GET /api/search", s.serveSearch)
	// Browsers ask for an icon on every page; no content rather than a
	// 404 in the console each time.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s.handler = s.guard(mux)
	return s, nil
}

// oneRead runs h, which reads and renders a whole session, once a slot of
// Options.MaxReads is free: what such requests hold at once is bounded by
// their number, not by how many tabs or scripts ask.
func (s *Server) oneRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.takeRead(r.Context()) {
			return // the client went
		}
		defer s.doneRead()
		h(w, r)
	}
}

// takeRead waits for a slot of Options.MaxReads, for a request that reads a
// whole session: the routes of oneRead, and the page's read ahead and an
// image's read when no kept snapshot serves them (before, those two read
// outside the bound: a browser restoring many tabs of large sessions read
// them all at once, past the memory budget). false: ctx ended first.
func (s *Server) takeRead(ctx context.Context) bool {
	s.queued.Add(1)
	defer s.queued.Add(-1)
	select {
	case s.reads <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) doneRead() { <-s.reads }

// ServeHTTP serves the view.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Token is the secret every request must carry.
func (s *Server) Token() string { return s.token }

// page serves one of the static page shells; the scripts fetch the data.
// A session's page answers with the status its data would: 404 for a
// session this machine does not hold (a stale bookmark, a mistyped link),
// 400 for an id no session can have, with the same shell, which shows the
// data request's message.
func (s *Server) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b := s.assets.pages[name]
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		sid := r.PathValue("sid")
		code, listed := http.StatusOK, (*projection.CatalogEntry)(nil)
		if sid != "" {
			code, listed = s.sessionStatus(r.Context(), sid)
		}
		if listed != nil && plainID(sid) {
			// The session's data and its tree are fetched while the
			// scripts load, rather than after (session.js asks for the
			// same URLs), and together: they share one read.
			w.Header().Set("Link", "</api/s/"+sid+">; rel=preload; as=fetch; crossorigin, </api/s/"+sid+"/tree>; rel=preload; as=fetch; crossorigin")
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(code)
		w.Write(b)
		if r.Method == http.MethodGet && listed != nil {
			// The page is complete for the browser (its length is
			// known); the session's read starts now, not when the
			// preloads arrive (on a first visit they come tens of ms
			// later, once the browser has a renderer for the page),
			// and they wait for it. Within the request, so that the
			// read ends when the browser goes away or the daemon
			// stops. The connection is busy meanwhile: the browser
			// sends the next request on it (its preloads come first:
			// they are asked for when the headers arrive) after the
			// read, which that request needed anyway.
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			s.readAhead(r.Context(), sid, *listed)
		}
	}
}

// sessionStatus is the status of session sid's page, and its catalog
// entry when the catalog lists it (the page then reads it ahead of its
// requests). One the catalog does not list yet may still be held (the
// catalog follows the streams a moment behind): it is read before the
// page's headers, which that read decides, and kept for the requests that
// follow.
func (s *Server) sessionStatus(ctx context.Context, sid string) (int, *projection.CatalogEntry) {
	if eventlog.CheckSID(sid) != nil {
		return http.StatusBadRequest, nil
	}
	if c := s.catalogEntry(ctx, sid); c != nil {
		return http.StatusOK, c
	}
	if !s.takeRead(ctx) {
		return http.StatusOK, nil
	}
	defer s.doneRead()
	if _, err := s.read(ctx, sid); errors.Is(err, projection.ErrUnknownSession) {
		return http.StatusNotFound, nil
	}
	// Read, or failed for a reason the page's data request reports.
	return http.StatusOK, nil
}

// readAhead reads session sid, listed in the catalog as c, unless a kept
// snapshot is current.
func (s *Server) readAhead(ctx context.Context, sid string, c projection.CatalogEntry) {
	if s.current(c) != nil {
		return
	}
	if !s.takeRead(ctx) {
		return
	}
	defer s.doneRead()
	s.read(ctx, sid) // a failure is the page's data request's to report
}

// plainID reports whether id needs no escaping in a URL path (session
// ids are UUIDs): only then is the page's data URL known to the server as
// the script spells it.
func plainID(id string) bool {
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func (s *Server) serveSearch(w http.ResponseWriter, r *http.Request) {
	if s.opts.Search == nil {
		http.Error(w, "search is off on this machine: start the daemon with PISYNC_SEARCH=on (docs/SEARCH.md)", http.StatusServiceUnavailable)
		return
	}
	s.opts.Search.ServeHTTP(w, r)
}
