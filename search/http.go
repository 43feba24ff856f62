package search

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Limits of the HTTP API (a local client is untrusted).
const (
	// QueryTimeout bounds one search.
	QueryTimeout = 5 * time.Second
	// maxConcurrent searches run at once; more wait for a turn within
	// their timeout.
	maxConcurrent = 4
)

// Handler serves GET /api/search (the daemon mounts it on its HTTP
// listener and its control socket):
//
//	?q=QUERY          words, "phrases", -excluded, session:/node:/type:/role: (ParseQuery)
//	&session=ID       only this session
//	&node=ID          only entries from this node
//	&limit=N          hits per page, 1 to MaxLimit (default DefaultLimit)
//	&after=N          skip the first N hits (Result.Next of the previous page)
//
// It answers a Result as JSON; a bad query is a 400 with {"error": why},
// a search past QueryTimeout a 503. unindexed (nil: not told) says how
// many messages the index has yet to add (Worker.Unindexed).
func (ix *Index) Handler(unindexed func(context.Context) (int64, error)) http.Handler {
	sem := make(chan struct{}, maxConcurrent)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			jsonError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		p := r.URL.Query()
		raw := p.Get("q")
		q, err := parse(raw)
		if err == nil {
			err = q.setFilter("session", &q.Session, p.Get("session"))
		}
		if err == nil {
			err = q.setFilter("node", &q.Node, p.Get("node"))
		}
		if err == nil {
			err = q.check()
		}
		limit, lerr := intParam(p.Get("limit"), DefaultLimit, 1, MaxLimit, "limit")
		after, aerr := intParam(p.Get("after"), 0, 0, MaxOffset, "after")
		if err = errors.Join(err, lerr, aerr); err != nil {
			jsonError(w, http.StatusBadRequest, err.Error())
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), QueryTimeout)
		defer cancel()
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		case <-ctx.Done():
			jsonError(w, http.StatusServiceUnavailable, "search: too many searches at once; try again")
			return
		}
		res, err := ix.Search(ctx, q, limit, after)
		switch {
		case errors.Is(err, ErrQuery):
			jsonError(w, http.StatusBadRequest, err.Error())
			return
		case ctx.Err() != nil:
			jsonError(w, http.StatusServiceUnavailable, "search: took longer than "+QueryTimeout.String()+"; narrow the query")
			return
		case err != nil:
			jsonError(w, http.StatusInternalServerError, err.Error())
			return
		}
		res.Query = raw
		if unindexed != nil {
			// Not knowing it (the store restarting) leaves it out.
			res.Unindexed, _ = unindexed(ctx)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(res)
	})
}

// setFilter sets a filter from a URL parameter; one the query names too
// must agree.
func (q *Query) setFilter(name string, dst *string, v string) error {
	if v == "" {
		return nil
	}
	if len(v) > maxFilter {
		return badQuery("%s: longer than %d bytes", name, maxFilter)
	}
	if *dst != "" && *dst != v {
		return badQuery("%s given in the query and as a parameter, differently", name)
	}
	*dst = v
	return nil
}

func intParam(s string, def, lo, hi int, name string) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badQuery("%s must be a number from %d to %d", name, lo, hi)
	}
	return n, nil
}

func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
