package projection

import (
	"cmp"
	"slices"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// The body cache keeps, per session, the raw lines of the window of its
// last context query (and the lines appended since), so a repeated query,
// or one after a few appends, renders from memory and reads only what is
// new from the streams. A ref names an immutable stream message, so a
// cached body never goes stale; the cache only costs memory, bounded for
// the whole worker by Options.MaxBodyBytes (least recently queried
// sessions dropped first).

// defaultMaxBodyBytes holds about twenty 10k-entry sessions.
const defaultMaxBodyBytes = 64 << 20

// bodyCache is one session's cached bodies. The session's mu guards it.
type bodyCache struct {
	bodies map[session.Ref][]byte
	bytes  int64
}

// keepBodies makes bodies (the window of a query just served, bytes in
// total) the session's cache, then trims the worker's caches to the
// budget. The caller holds s.mu.
func (w *Worker) keepBodies(s *sessionState, bodies map[session.Ref][]byte, bytes int64) {
	w.dropBodies(s)
	if bytes > w.opts.MaxBodyBytes {
		return
	}
	s.bodies = &bodyCache{bodies: bodies, bytes: bytes}
	w.mu.Lock()
	w.bodyBytes += bytes
	over := w.bodyBytes > w.opts.MaxBodyBytes
	w.mu.Unlock()
	if over {
		w.trimBodies(s)
	}
}

// cacheBody adds an applied line to the session's cache, if it has one:
// the next query will likely need it. The caller holds s.mu.
func (w *Worker) cacheBody(s *sessionState, ev *eventlog.Event) {
	if s.bodies == nil || ev.Op != "" {
		return
	}
	raw := session.ToValidUTF8(ev.Raw)
	s.bodies.bodies[makeRef(ev.Stream, ev.Seq)] = raw
	s.bodies.bytes += int64(len(raw))
	w.mu.Lock()
	w.bodyBytes += int64(len(raw))
	over := w.bodyBytes > w.opts.MaxBodyBytes
	w.mu.Unlock()
	if over {
		w.trimBodies(s)
	}
}

// dropBodies forgets the session's cache. The caller holds s.mu.
func (w *Worker) dropBodies(s *sessionState) {
	if s.bodies == nil {
		return
	}
	w.mu.Lock()
	w.bodyBytes -= s.bodies.bytes
	w.mu.Unlock()
	s.bodies = nil
}

// trimBodies drops caches, least recently used sessions first, until the
// total fits the budget; self (whose mu the caller holds) goes last.
func (w *Worker) trimBodies(self *sessionState) {
	type use struct {
		s    *sessionState
		last uint64
	}
	var cands []use
	w.mu.Lock()
	for _, s := range w.sessions {
		if s != self {
			cands = append(cands, use{s, s.lastUse})
		}
	}
	w.mu.Unlock()
	slices.SortFunc(cands, func(a, b use) int { return cmp.Compare(a.last, b.last) })
	for _, u := range cands {
		w.mu.Lock()
		done := w.bodyBytes <= w.opts.MaxBodyBytes
		w.mu.Unlock()
		if done {
			return
		}
		if u.s.mu.TryLock() { // a session in use keeps its cache for now
			w.dropBodies(u.s)
			u.s.mu.Unlock()
		}
	}
	w.mu.Lock()
	over := w.bodyBytes > w.opts.MaxBodyBytes
	w.mu.Unlock()
	if over {
		w.dropBodies(self)
	}
}
