package projection

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// A context query holds the session's lock only while it asks the tree
// for the context's index (the window and which bodies it needs, a little
// per entry, independent of the bodies); the bodies are then read from
// the streams a read-ahead at a time (Options.ReadAhead) while the
// messages are written, so a 200 MB context costs the read-ahead, not
// 200 MB (docs/PERFORMANCE.md, Memory).

// Context builds the session's full LLM context at its leaf in memory: the
// tree (rebuilt from the stream if it is not in memory) decides the window,
// and the bodies of the window's messages are read from the streams by
// their refs. It equals `pisyncd context FILE --json` on the session's
// file. WriteContext writes the same without holding it.
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
	var c *session.Context
	err := w.eachContext(ctx, sid, leaf, mode, false, func(ix *session.Index, src session.BodySource) error {
		var err error
		c, err = ix.Context(src)
		return err
	})
	return c, err
}

// WriteContext writes the session's context at leaf ("" for its own)
// under the rule set mode to out, byte for byte what session.ReportJSON of
// ContextRules writes, one message at a time: the bodies are read a
// read-ahead at a time as the messages are written. An error after the
// first byte leaves out holding a prefix.
func (w *Worker) WriteContext(ctx context.Context, out io.Writer, sid, leaf string, mode session.RuleSet) error {
	return w.eachContext(ctx, sid, leaf, mode, true, func(ix *session.Index, src session.BodySource) error {
		return session.WriteReport(out, ix, src, mode)
	})
}

// eachContext hands the index of the session's context at leaf, and a
// source of its bodies, to use. The session's bodies kept from the last
// query serve first; the window's bodies are kept for the next query when
// they fit the worker's body cache. streaming says that use holds a body
// no longer than until it asks for the one after the next
// (Index.EachMessage: an entry, then its edit), not all of them.
func (w *Worker) eachContext(ctx context.Context, sid, leaf string, mode session.RuleSet, streaming bool, use func(*session.Index, session.BodySource) error) error {
	select {
	case <-w.ready:
	case <-ctx.Done():
		return fmt.Errorf("projection: context: %w", errNotReady)
	}
	s := w.lookup(sid, false)
	if s == nil {
		return fmt.Errorf("%w %q", ErrUnknownSession, sid)
	}
	w.contextWaiting.Add(1)
	select {
	case w.contextSlots <- struct{}{}:
		w.contextWaiting.Add(-1)
		defer func() { <-w.contextSlots }()
	case <-ctx.Done():
		w.contextWaiting.Add(-1)
		return fmt.Errorf("projection: context: waiting for one of the %d queries before it: %w", contextQueries, context.Cause(ctx))
	}
	ix, err := w.index(ctx, s, leaf, mode)
	if err != nil {
		return notSessionWhy(err, sid)
	}
	known := func(r session.Ref) ([]byte, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.bodies == nil {
			return nil, false
		}
		b, ok := s.bodies.bodies[r]
		return b, ok
	}
	src := newStreamBodies(ctx, w.nc, w.js, w.filters(sid), known, ix, w.readAhead(), w.opts.MaxBodyBytes)
	s.mu.Lock()
	if s.kept != nil {
		src.files = newFileBodies(w.opts.SessionsDir, s.kept.locs)
	}
	s.mu.Unlock()
	src.recycle = streaming && src.files != nil && src.keep == nil
	err = use(ix, src)
	if cerr := src.close(); err == nil {
		err = cerr
	}
	w.bodiesFromFile.Add(src.fromFile.Load())
	w.bodiesFromStore.Add(src.fromStore.Load())
	for peak := w.readAheadPeak.Load(); src.peak > peak && !w.readAheadPeak.CompareAndSwap(peak, src.peak); {
		peak = w.readAheadPeak.Load()
	}
	if err != nil {
		return fmt.Errorf("projection: context: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if src.keep == nil {
		w.dropBodies(s) // the window does not fit the cache
	} else {
		w.keepBodies(s, src.keep, src.keepBytes)
	}
	return nil
}

// contextQueries is how many context queries read bodies at once; the
// others wait for one of them to end. Each reads ahead its own share of
// Options.ReadAhead: twenty at once, each with the whole of it, took a
// daemon of a 512 MiB budget to 912 MB (a probe, 2026-12-07).
const contextQueries = 2

// readAhead is one context query's share of Options.ReadAhead.
func (w *Worker) readAhead() int64 {
	ahead := w.opts.ReadAhead
	if ahead <= 0 {
		ahead = defaultReadAhead
	}
	return ahead / contextQueries
}

// index is the session's context index at leaf under the rule set mode,
// its tree loaded first.
func (w *Worker) index(ctx context.Context, s *sessionState, leaf string, mode session.RuleSet) (*session.Index, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cat.Src) == 0 {
		return nil, fmt.Errorf("%w %q", ErrUnknownSession, s.sid)
	}
	if err := w.ensureTree(ctx, s); err != nil {
		return nil, err
	}
	if prev := s.tree.RuleMode(); prev != mode {
		// Under s.mu: no event is applied to the tree meanwhile, and the
		// views are built from it only after the set is back. The index
		// keeps the set it was built under.
		s.tree.SetRules(mode)
		defer s.tree.SetRules(prev)
	}
	return treeIndex(s.tree, leaf)
}

func treeIndex(t *session.Tree, leaf string) (*session.Index, error) {
	var ix *session.Index
	var err error
	if leaf == "" {
		ix, err = t.Index()
	} else {
		ix, err = t.IndexAt(&leaf)
	}
	if err != nil {
		return nil, fmt.Errorf("projection: context: %w", err)
	}
	return ix, nil
}

// LoadContext builds a session's context straight from the streams,
// without a worker or the bucket. all includes PI_ALL (other nodes' lines);
// rules is the rule set.
func LoadContext(ctx context.Context, nc *nats.Conn, node, sid, leaf string, all bool, rules session.RuleSet) (*session.Context, error) {
	var c *session.Context
	err := loadContext(ctx, nc, node, sid, leaf, all, rules, func(ix *session.Index, src session.BodySource) error {
		var err error
		c, err = ix.Context(src)
		return err
	})
	return c, err
}

// WriteStoredContext is LoadContext written to out as WriteContext writes
// it: what `pisyncd context SESSION-ID` does when no daemon runs.
func WriteStoredContext(ctx context.Context, out io.Writer, nc *nats.Conn, node, sid, leaf string, all bool, rules session.RuleSet) error {
	return loadContext(ctx, nc, node, sid, leaf, all, rules, func(ix *session.Index, src session.BodySource) error {
		return session.WriteReport(out, ix, src, rules)
	})
}

func loadContext(ctx context.Context, nc *nats.Conn, node, sid, leaf string, all bool, rules session.RuleSet, use func(*session.Index, session.BodySource) error) error {
	w, err := New(nc, Options{Node: node, All: all, Rules: rules})
	if err != nil {
		return err
	}
	upTo, err := w.ends(ctx, sid)
	if err != nil {
		return fmt.Errorf("projection: context: %w", err)
	}
	r, err := w.rebuild(ctx, sid, upTo)
	if err != nil {
		return err
	}
	if r.err != nil {
		return fmt.Errorf("projection: context: %w", notSessionWhy(r.err, sid))
	}
	ix, err := treeIndex(r.tree, leaf)
	if err != nil {
		return err
	}
	src := newStreamBodies(ctx, nc, w.js, w.filters(sid), nil, ix, w.opts.ReadAhead, 0)
	defer src.close()
	if err := use(ix, src); err != nil {
		return fmt.Errorf("projection: context: %w", notSessionWhy(err, sid))
	}
	return nil
}

// ends is where the session's events end now in each stream that holds
// some; ErrUnknownSession when none does.
func (w *Worker) ends(ctx context.Context, sid string) (Src, error) {
	upTo := Src{}
	for stream, filter := range w.filters(sid) {
		s, err := w.js.Stream(ctx, stream)
		if err != nil {
			if stream == eventlog.AllStream && errors.Is(err, jetstream.ErrStreamNotFound) {
				continue
			}
			return nil, err
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return nil, err
		}
		// The filter narrows only the subjects listed: State.Msgs and
		// LastSeq are the whole stream's, so the subjects say whether
		// the session has any line here (LastSeq is a bound on them).
		if len(info.State.Subjects) > 0 {
			upTo[stream] = info.State.LastSeq
		}
	}
	if len(upTo) == 0 {
		return nil, fmt.Errorf("%w %q", ErrUnknownSession, sid)
	}
	return upTo, nil
}

// notSessionWhy adds to pi's refusal of a session (ErrNotSession) its most
// likely cause here: a copy whose first lines have not come (held for a
// key, refused, still on their way). The bare "not a valid pi session"
// left a newcomer with nothing to act on.
func notSessionWhy(err error, sid string) error {
	if !errors.Is(err, session.ErrNotSession) {
		return err
	}
	return fmt.Errorf("%w: the first line this machine holds of session %s is not its header, so pi would not open it either; if it is another machine's, its first lines have not come here: pisyncd status says why lines wait", err, sid)
}
