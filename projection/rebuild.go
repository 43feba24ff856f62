package projection

import (
	"context"
	"errors"
	"fmt"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// rebuilt is a tree read back from the streams.
type rebuilt struct {
	tree *session.Tree
	err  error
	// What the replay learned of an old session's migration.
	migratedBy string
	losers     []string
	kept       *treeKept
}

// filters are the session's subject filters per stream: its own subject in
// PI_LOCAL, every node's subject in PI_ALL (this node's are skipped there).
func (w *Worker) filters(sid string) map[string]string {
	f := map[string]string{eventlog.LocalStream: eventlog.LocalSubject(w.opts.Node, sid)}
	if w.opts.All {
		f[eventlog.AllStream] = eventlog.SessionFilter(sid)
	}
	return f
}

// errLocalAfterAll ends a rebuild's read of PI_LOCAL at its first line
// when that is no header: it is read again after PI_ALL.
var errLocalAfterAll = errors.New("projection: this machine's lines after the other machines'")

// rebuild reads the session's events up to the sequences in upTo and
// feeds them to a new tree: PI_LOCAL first, then PI_ALL, or PI_ALL first
// for a session begun elsewhere (its header is there, not in PI_LOCAL).
// A session two nodes appended to concurrently may have
// been applied interleaved before, which can only move the leaf between
// the tips of the same tree (see docs/PROJECTIONS.md, open points).
func (w *Worker) rebuild(ctx context.Context, sid string, upTo Src) (rebuilt, error) {
	return w.rebuildKeep(ctx, sid, upTo, nil)
}

// rebuildKeep is rebuild that also hands each line fed to the tree to keep
// (nil: none).
func (w *Worker) rebuildKeep(ctx context.Context, sid string, upTo Src, keep func(*eventlog.Event)) (rebuilt, error) {
	s := newSessionState(sid)
	s.tree = session.NewTree()
	s.tree.SetRules(w.opts.Rules)
	order := []string{eventlog.LocalStream, eventlog.AllStream}
	for i := 0; i < len(order); i++ {
		stream := order[i]
		filter, ok := w.filters(sid)[stream]
		if !ok || upTo[stream] == 0 {
			continue
		}
		err := eventlog.ReadFiltered(ctx, w.js, stream, filter, upTo[stream], false, func(ev *eventlog.Event) error {
			if ev.Op != "" || (stream == eventlog.AllStream && ev.Node == w.opts.Node) {
				return nil
			}
			if i == 0 && s.tree.Header() == nil && ev.Type != "session" && upTo[eventlog.AllStream] > 0 {
				// This machine's lines of a session begun elsewhere
				// (continued here): its header is another node's,
				// in PI_ALL. Fed first, they made the tree take
				// the session for none of pi's (its first line no
				// header), and context, ls and the web view failed
				// on it after every restart. They follow PI_ALL's.
				return errLocalAfterAll
			}
			s.feed(ev, ev.Node) // a state kept only for this read
			if keep != nil {
				keep(ev)
			}
			return nil
		})
		if errors.Is(err, errLocalAfterAll) {
			order = append(order, eventlog.LocalStream)
			continue
		}
		if err != nil {
			return rebuilt{}, fmt.Errorf("projection: rebuild %s from %s: %w", sid, stream, err)
		}
	}
	if len(upTo) > 0 {
		w.rebuilds.Add(1)
	}
	return rebuilt{tree: s.tree, err: s.err, migratedBy: s.cat.MigratedBy, losers: s.cat.MigrationLosers, kept: s.kept}, nil
}
