package projection

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// Handler serves the projection on the daemon's control socket:
//
//	GET /ls                                   the catalog, newest first (JSON array)
//	GET /context?session=ID[&leaf=ID][&rules=auto|seed|pi-1.6]
//	                                          the full context: corpus JSON with the rule set (ContextJSON)
//	GET /tail?session=&type=&from=start|now   NDJSON, one TailEntry a line, until the client goes
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
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("X-Pi-Sessions", strconv.Itoa(len(c)))
	json.NewEncoder(rw).Encode(c)
}

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
	c, err := w.ContextRules(r.Context(), sid, r.URL.Query().Get("leaf"), mode)
	if errors.Is(err, ErrUnknownSession) {
		http.Error(rw, err.Error(), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(rw, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	b, err := ContextJSON(c, mode)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Write(append(b, '\n'))
}

func (w *Worker) serveTail(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := TailOptions{Session: q.Get("session"), Type: q.Get("type")}
	if o.Session != "" {
		if err := eventlog.CheckSID(o.Session); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
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
