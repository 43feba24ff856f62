package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/session"
)

// ContextJSON is a context as `/context` and `pisyncd context --json`
// print it: the corpus shape with the rule set that built it first,
//
//	{"rules":"pi-1.6","rulesMode":"auto","leafId":…,"contextEntryIds":…}
//
// rules is the set the context followed (seed or pi-1.6); rulesMode is
// the one asked for (PISYNC_RULES or --rules): auto when the session's
// lines chose rules. Both are additions: a reader of the corpus shape
// ignores them.
func ContextJSON(c *session.Context, mode session.RuleSet) ([]byte, error) {
	body, err := c.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(rulesHead(c.Rules, mode), body[1:]...), nil
}

// rulesHead opens the context object with the rule set used and the one
// asked for: {"rules":…,"rulesMode":…, (the corpus shape follows without
// its opening brace).
func rulesHead(used, asked session.RuleSet) []byte {
	u, _ := json.Marshal(used.String())
	a, _ := json.Marshal(asked.String())
	head := append([]byte(`{"rules":`), u...)
	head = append(head, `,"rulesMode":`...)
	head = append(head, a...)
	return append(head, ',')
}

// WriteContextJSON writes ix as ContextJSON would, streaming the messages:
// the rules fields, then ix.WriteContext's object without its opening
// brace.
func WriteContextJSON(out io.Writer, ix *session.Index, src session.BodySource, mode session.RuleSet) error {
	if _, err := out.Write(rulesHead(ix.Rules, mode)); err != nil {
		return err
	}
	return ix.WriteContext(&skipFirstByte{w: out}, src)
}

// skipFirstByte drops the first byte written through it (the opening
// brace that writeContextJSON has already written).
type skipFirstByte struct {
	w       io.Writer
	skipped bool
}

func (s *skipFirstByte) Write(p []byte) (int, error) {
	if s.skipped || len(p) == 0 {
		return s.w.Write(p)
	}
	s.skipped = true
	n, err := s.w.Write(p[1:])
	return n + 1, err
}

// rulesKey holds the name of the rule set mode (auto, seed, pi-1.6) the
// views were last computed under.
const rulesKey = "rules"

// reproject brings the views to the worker's rule set after a restart
// under another PISYNC_RULES (or over views of a version that did not
// record one): events only rewrite the sessions they touch, so without it
// a session nobody writes to would keep views of the old rules. Every
// session's views are written again (their trees are rebuilt from the
// streams, one at a time, within MaxTrees), then the set is recorded. It
// runs beside the followers; an interrupted pass starts over at the next
// start.
func (w *Worker) reproject(ctx context.Context) error {
	want := w.opts.Rules.String()
	e, err := w.kv.Get(ctx, rulesKey)
	switch {
	case err == nil && string(e.Value()) == want:
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("projection: rule set of the views: %w", err)
	}
	w.mu.Lock()
	states := make([]*sessionState, 0, len(w.sessions))
	for _, s := range w.sessions {
		states = append(states, s)
	}
	w.mu.Unlock()
	if len(states) > 0 {
		w.logger.Info("projection: computing every session's views under the rule set", "rules", want, "sessions", len(states))
	}
	for _, s := range states {
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
