package projection

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// Context builds the session's full LLM context at its leaf: the tree
// (rebuilt from the stream if it is not in memory) decides the window, and
// the bodies of the window's messages are read from the streams by their
// refs. It equals `pisyncd context FILE --json` on the session's file.
func (w *Worker) Context(ctx context.Context, sid string) (*session.Context, error) {
	return w.ContextAt(ctx, sid, "")
}

// ContextAt is Context as if pi's branch(leaf) had moved the leaf; "" is
// the session's own leaf.
func (w *Worker) ContextAt(ctx context.Context, sid, leaf string) (*session.Context, error) {
	return w.ContextRules(ctx, sid, leaf, w.opts.Rules)
}

// ContextRules is ContextAt under the rule set mode instead of the
// worker's (`pisyncd context --rules`). The views keep the worker's set:
// the tree follows mode for this query only.
func (w *Worker) ContextRules(ctx context.Context, sid, leaf string, mode session.RuleSet) (*session.Context, error) {
	select {
	case <-w.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("projection: context: %w", errNotReady)
	}
	s := w.lookup(sid, false)
	if s == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownSession, sid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cat.Src) == 0 {
		return nil, fmt.Errorf("%w %q", ErrUnknownSession, sid)
	}
	if err := w.ensureTree(ctx, s); err != nil {
		return nil, err
	}
	if prev := s.tree.RuleMode(); prev != mode {
		// Under s.mu: no event is applied to the tree meanwhile, and the
		// views are built from it only after the set is back.
		s.tree.SetRules(mode)
		defer s.tree.SetRules(prev)
	}
	var known map[session.Ref][]byte
	if s.bodies != nil {
		known = s.bodies.bodies
	}
	c, win, err := buildContext(ctx, w.nc, w.js, s.tree, w.filters(sid), leaf, known)
	if err != nil {
		return nil, err
	}
	w.keepBodies(s, win.bodies, win.bytes)
	return c, nil
}

// buildContext asks the tree for the context's index, which names the
// refs the window needs (exact: the window is metadata), then renders the
// context with those bodies, taken from known (bodies kept from earlier
// queries, only read) or else read in one pass over the session's
// subjects. A body the read missed is fetched on its own by the source.
// It also returns the window's bodies, for the caller to keep.
func buildContext(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, t *session.Tree, filters map[string]string, leaf string, known map[session.Ref][]byte) (*session.Context, windowBodies, error) {
	var ix *session.Index
	var err error
	if leaf == "" {
		ix, err = t.Index()
	} else {
		ix, err = t.IndexAt(&leaf)
	}
	if err != nil {
		return nil, windowBodies{}, fmt.Errorf("projection: context: %w", err)
	}
	src := newStreamBodies(ctx, nc, filters, known)
	var missing []session.Ref
	for _, r := range ix.Refs {
		if _, ok := known[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		if err := src.prefetch(js, missing); err != nil {
			return nil, windowBodies{}, err
		}
	}
	var c *session.Context
	if leaf == "" {
		c, err = t.Context(src)
	} else {
		c, err = t.ContextAt(&leaf, src)
	}
	if err != nil {
		return nil, windowBodies{}, fmt.Errorf("projection: context: %w", err)
	}
	return c, src.window(ix.Refs), nil
}

// LoadContext builds a session's context straight from the streams,
// without a worker or the bucket: what `pisyncd context SESSION-ID` does
// when no daemon runs. all includes PI_ALL (other nodes' lines); rules is
// the rule set.
func LoadContext(ctx context.Context, nc *nats.Conn, node, sid, leaf string, all bool, rules session.RuleSet) (*session.Context, error) {
	w, err := New(nc, Options{Node: node, All: all, Rules: rules})
	if err != nil {
		return nil, err
	}
	upTo := Src{}
	for stream, filter := range w.filters(sid) {
		s, err := w.js.Stream(ctx, stream)
		if err != nil {
			if stream == eventlog.AllStream && errors.Is(err, jetstream.ErrStreamNotFound) {
				continue
			}
			return nil, fmt.Errorf("projection: context: %w", err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return nil, fmt.Errorf("projection: context: %w", err)
		}
		if info.State.Msgs > 0 {
			upTo[stream] = info.State.LastSeq
		}
	}
	if len(upTo) == 0 {
		return nil, fmt.Errorf("%w %q", ErrUnknownSession, sid)
	}
	r, err := w.rebuild(ctx, sid, upTo)
	if err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, fmt.Errorf("projection: context: %w", r.err)
	}
	c, _, err := buildContext(ctx, nc, w.js, r.tree, w.filters(sid), leaf, nil)
	return c, err
}
