package projection

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// HdrTailSession is /tail's answer header that says the session asked for
// is not held by any stream yet ("unknown").
const HdrTailSession = "Pisync-Session"

// Handler serves the projection on the daemon's control socket:
//
//	GET /ls                                   the catalog, newest first (JSON array)
//	GET /context?session=ID[&leaf=ID][&rules=auto|seed|pi-1.6]
//	                                          the full context: corpus JSON with the rule set
//	                                          (session.ReportJSON), streamed (serveContext)
//	GET /tail?session=&type=&from=start|now   NDJSON, one TailEntry a line, until the client goes;
//	                                          Pisync-Session: unknown when no stream holds the
//	                                          session yet (it is followed all the same)
//
// Errors are plain text with a status; an error after a stream began is a
// final {"error": "..."} line.
func (w *Worker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ls", w.serveLs)
	mux.HandleFunc("GET /context", w.serveContext)
	mux.HandleFunc("GET /tail", w.serveTail)
	return mux
}

func (w *Worker) serveLs(rw http.ResponseWriter, r *http.Request) {
	c, err := w.Catalog(r.Context())
	if err != nil {
		http.Error(rw, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if c == nil {
		c = []CatalogEntry{}
	}
	c = w.localPaths(c)
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("X-Pi-Sessions", strconv.Itoa(len(c)))
	json.NewEncoder(rw).Encode(c)
}

// serveContext writes the context as WriteContext produces it. An answer
// that fits pendingMax is sent only once complete, so a failure still gets
// its status; a longer one is sent as it is written, and a failure after
// that ends it early with the error in the ErrorTrailer trailer (the body
// is then a prefix of the context).
func (w *Worker) serveContext(rw http.ResponseWriter, r *http.Request) {
	sid := r.URL.Query().Get("session")
	if err := eventlog.CheckSID(sid); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest) // no subject or key is built from it
		return
	}
	mode := w.opts.Rules
	if s := r.URL.Query().Get("rules"); s != "" {
		var err error
		if mode, err = session.ParseRuleSet(s); err != nil {
			http.Error(rw, "rules: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	out := &pendingWriter{rw: rw}
	err := w.WriteContext(r.Context(), out, sid, r.URL.Query().Get("leaf"), mode)
	if err == nil {
		_, err = out.Write([]byte{'\n'})
	}
	switch {
	case err == nil:
		out.commit()
		out.flush()
	case out.committed:
		out.flush()
		rw.Header().Set(http.TrailerPrefix+ErrorTrailer, err.Error())
	case errors.Is(err, ErrUnknownSession):
		http.Error(rw, err.Error(), http.StatusNotFound)
	default:
		http.Error(rw, err.Error(), http.StatusUnprocessableEntity)
	}
}

// ErrorTrailer is the trailer that carries the error which ended an
// answer early.
const ErrorTrailer = "Pisync-Error"

// pendingMax is how much of an answer is held back before it is sent.
const pendingMax = 1 << 20

// pendingWriter holds the first pendingMax bytes of a JSON answer, then
// sends them and everything after as it comes, in writes of sendSize
// (a 200 MB context in 200 chunks of the response, not 3,200).
type pendingWriter struct {
	rw        http.ResponseWriter
	buf       []byte
	w         *bufio.Writer // after commit
	committed bool
}

const sendSize = 1 << 20

func (p *pendingWriter) Write(b []byte) (int, error) {
	if !p.committed && len(p.buf)+len(b) <= pendingMax {
		p.buf = append(p.buf, b...)
		return len(b), nil
	}
	if err := p.commit(); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}

// flush sends what is buffered.
func (p *pendingWriter) flush() error {
	if p.w == nil {
		return nil
	}
	return p.w.Flush()
}

// commit sends the status and what is held.
func (p *pendingWriter) commit() error {
	if p.committed {
		return nil
	}
	p.committed = true
	p.rw.Header().Set("Content-Type", "application/json")
	p.w = bufio.NewWriterSize(p.rw, sendSize)
	_, err := p.w.Write(p.buf)
	p.buf = nil
	return err
}

func (w *Worker) serveTail(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := TailOptions{Session: q.Get("session"), Type: q.Get("type")}
	if o.Session != "" {
		if err := eventlog.CheckSID(o.Session); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		// A session may start later, so it is followed anyway; the
		// client says that nothing holds it yet, rather than wait in
		// silence on a mistyped id.
		if _, err := w.ends(r.Context(), o.Session); errors.Is(err, ErrUnknownSession) {
			rw.Header().Set(HdrTailSession, "unknown")
		}
	}
	switch q.Get("from") {
	case "", "now":
	case "start":
		o.FromStart = true
	default:
		http.Error(rw, "from: start or now", http.StatusBadRequest)
		return
	}
	rw.Header().Set("Content-Type", "application/x-ndjson")
	rw.WriteHeader(http.StatusOK)
	fl, _ := rw.(http.Flusher)
	if fl != nil {
		fl.Flush() // the client knows it is subscribed
	}
	enc := json.NewEncoder(rw)
	err := w.Tail(r.Context(), o, func(e TailEntry) error {
		if err := enc.Encode(e); err != nil {
			return err
		}
		if fl != nil {
			fl.Flush()
		}
		return nil
	})
	if err != nil && r.Context().Err() == nil {
		enc.Encode(map[string]string{"error": err.Error()})
	}
}

// localPaths gives this node's file of each session as the tailer follows
// it now. The catalog keeps the file of the last line applied, and a file
// moved or renamed publishes no line: ls showed its old path until the
// next one (a probe on 2026-12-06). c is the cached catalog: an entry
// changed is a copy, in a copy of the slice.
func (w *Worker) localPaths(c []CatalogEntry) []CatalogEntry {
	if w.opts.LocalFiles == nil {
		return c
	}
	copied := false
	for i := range c {
		was := c[i].Files.Get(w.opts.Node)
		if was == "" {
			continue
		}
		now := w.opts.LocalFiles(c[i].SessionID)
		if len(now) == 0 || slices.Contains(now, was) {
			continue
		}
		if !copied {
			c, copied = slices.Clone(c), true
		}
		e := c[i].clone()
		e.Files.set(w.opts.Node, now[0])
		if e.File == was {
			e.File = now[0]
		}
		c[i] = e
	}
	return c
}
