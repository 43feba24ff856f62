package projection

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// rulesKey holds the name of the rule set mode (auto, seed, pi-1.6) the
// views were last computed under.
const rulesKey = "rules"

// reproject brings the views to the worker's rule set after a restart
// under another PISYNC_RULES (or over views of a version that did not
// record one): events only rewrite the sessions they touch, so without it
// a session nobody writes to would keep views of the old rules. The views
// of every session loaded from the bucket at start (loaded) are written
// again (their trees are rebuilt from the streams, one at a time, within
// MaxTrees), then the set is recorded; a session this process projected
// first has its views under the rule set already (on a first start, all of
// them). It runs beside the followers; an interrupted pass starts over at
// the next start.
func (w *Worker) reproject(ctx context.Context, loaded []*sessionState) error {
	want := w.opts.Rules.String()
	e, err := w.kv.Get(ctx, rulesKey)
	switch {
	case err == nil && string(e.Value()) == want:
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("projection: rule set of the views: %w", err)
	}
	if len(loaded) > 0 {
		w.logger.Info("projection: computing every session's views under the rule set", "rules", want, "sessions", len(loaded))
	}
	for _, s := range loaded {
		s.mu.Lock()
		empty := len(s.cat.Src) == 0
		s.mu.Unlock()
		if empty {
			continue
		}
		if err := w.writeViewsNow(ctx, s); err != nil {
			return fmt.Errorf("projection: rule set %s: %w", want, err)
		}
		w.evict()
	}
	w.mu.Lock()
	w.catDirty = true
	w.mu.Unlock()
	if _, err := w.kv.Put(ctx, rulesKey, []byte(want)); err != nil {
		return fmt.Errorf("projection: rule set of the views: %w", err)
	}
	return nil
}
