package watch

import (
	"context"
	"sync"

	"github.com/pisyncd/pisyncd/eventlog"
)

// heldAtStart is which sessions' subjects held a message when the tailer
// started, read in one request, so that the first read of thousands of
// new sessions does not ask the store about each one twice (the resume
// check and the load before its first publish). Those requests waited on
// the store's lock behind the batches being stored, and the workers spent
// most of a first read of 10,000 new sessions waiting on them
// (docs/PERFORMANCE.md). It is used during the first read only, and for a
// session only until its first load: from then on this process may have
// written to the subject, and only the store knows. Were it stale (an
// erase published meanwhile), the first publish's expected sequence fails,
// and the session reads its subject again, as after any failed publish.
type heldAtStart struct {
	mu   sync.Mutex
	sids map[string]struct{} // nil: not known (read failed, or first read done)
}

// read takes the snapshot.
func (h *heldAtStart) read(ctx context.Context, log Log) error {
	sids, err := log.Held(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.sids = sids
	h.mu.Unlock()
	return nil
}

// take ends its use (the first read is done) and returns the sessions it
// held: those whose subjects held lines at start, and those loaded since.
func (h *heldAtStart) take() map[string]struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	sids := h.sids
	h.sids = nil
	return sids
}

// empty reports whether sid's subject held nothing at start and this
// process has not loaded it since; load marks it loaded.
func (h *heldAtStart) empty(sid string, load bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sids == nil {
		return false
	}
	_, held := h.sids[sid]
	if load {
		h.sids[sid] = struct{}{}
	}
	return !held
}

// lastOf is the last message of sid's subject: none, without asking the
// store, while the snapshot knows it empty.
func (t *Tailer) lastOf(ctx context.Context, sid string) (uint64, *eventlog.Event, error) {
	if t.heldAtStart.empty(sid, false) {
		return 0, nil, nil
	}
	return t.log.Last(ctx, sid)
}
