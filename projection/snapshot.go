package projection

import (
	"context"
	"fmt"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// Snapshot is a session read back from the streams at one moment: the tree
// the worker builds from them, the bytes of each line, and the positions
// it reflects. A reader that shows every entry (the web view) takes one,
// then follows Tail with After: Src to miss nothing after it.
type Snapshot struct {
	Tree *session.Tree
	// Err is why pi would not load the session (the tree holds what came
	// before it), or nil.
	Err error
	// Src is, per stream, the sequence the snapshot was read up to.
	Src Src
	// Truncated is set when the lines' bytes passed the bound given to
	// Snapshot: the earlier lines are in the tree but have no bytes.
	Truncated bool
	lines     map[session.Ref][]byte
	nodes     map[session.Ref]string
}

// Line returns the bytes of the line at ref (a Ref of Tree.Entry).
func (s *Snapshot) Line(ref session.Ref) ([]byte, bool) {
	b, ok := s.lines[ref]
	return b, ok
}

// Node is the node that published the line at ref.
func (s *Snapshot) Node(ref session.Ref) string { return s.nodes[ref] }

// Position names the stream and sequence of the line at ref.
func Position(ref session.Ref) (stream string, seq uint64) {
	return refStream(ref), refSeq(ref)
}

// Snapshot reads the session's lines from the streams as they are now,
// keeping at most maxBytes of line bytes (0: no bound), those of the last
// lines read: a reader shows the leaf first, and the newest lines are
// nearest it (the first ones kept, the page of a session past the bound
// opened on 200 entries "not loaded"). It does not touch
// the worker's state: the tree is built anew, as a context query on a
// session out of memory builds it.
func (w *Worker) Snapshot(ctx context.Context, sid string, maxBytes int64) (*Snapshot, error) {
	select {
	case <-w.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("projection: snapshot: %w", errNotReady)
	}
	upTo, err := w.ends(ctx, sid)
	if err != nil {
		return nil, fmt.Errorf("projection: snapshot: %w", err)
	}
	snap := &Snapshot{Src: upTo, lines: map[session.Ref][]byte{}, nodes: map[session.Ref]string{}}
	var held int64
	var kept []session.Ref // oldest first
	r, err := w.rebuildKeep(ctx, sid, upTo, func(ev *eventlog.Event) {
		ref := makeRef(ev.Stream, ev.Seq)
		snap.nodes[ref] = ev.Node
		if maxBytes > 0 && int64(len(ev.Raw)) > maxBytes {
			snap.Truncated = true
			return
		}
		line := session.ToValidUTF8(ev.Raw)
		snap.lines[ref], kept, held = line, append(kept, ref), held+int64(len(line))
		for maxBytes > 0 && held > maxBytes {
			held -= int64(len(snap.lines[kept[0]]))
			delete(snap.lines, kept[0])
			kept, snap.Truncated = kept[1:], true
		}
	})
	if err != nil {
		return nil, err
	}
	if len(snap.nodes) == 0 {
		// No line of it left, only the events about it (an erase): as
		// unknown as a session that never was, not an empty one.
		return nil, fmt.Errorf("projection: snapshot: %w %q", ErrUnknownSession, sid)
	}
	snap.Tree, snap.Err = r.tree, r.err
	return snap, nil
}

// Positions is where each stream the worker follows ends now: a Tail
// reader that starts from now passes it as After, and so holds a position
// it can resume from before its first entry arrives.
func (w *Worker) Positions(ctx context.Context) (Src, error) {
	src := Src{}
	for stream := range w.tailFilters("") {
		s, err := w.js.Stream(ctx, stream)
		if err != nil {
			return nil, fmt.Errorf("projection: positions: %w", err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("projection: positions: %w", err)
		}
		src[stream] = info.State.LastSeq
	}
	return src, nil
}
