package projection

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
)

// An erase event (`pisyncd erase`) drops the session from the views: its
// state in memory (tree, bodies, catalog entry) and every value of it in
// the bucket, purged so that no history of them is kept. The follower that
// reads the event does it, in its own stream order; the session's lines
// are erased from the streams by the machine's erase itself (the daemon
// here, the replicator for another machine's erase).

// erase drops ev's session. Events of the session that either stream
// delivers later but that precede the erase (the other stream may be
// behind) are skipped: erasedBelow keeps, per session, the sequences up to
// which its events are gone. Lines after them are a new session.
func (w *Worker) erase(ctx context.Context, f *follower, ev *eventlog.Event) error {
	below := Src{ev.Stream: ev.Seq}
	if ev.Stream == eventlog.AllStream && ev.Node == w.opts.Node {
		// This node's own erase, back from the hub (the PI_LOCAL
		// follower dropped the session already): it takes what came
		// into PI_ALL meanwhile, but not a session written here again
		// since, which the hub may have been slow to tell us about.
		if ev.SrcSeq == 0 {
			return nil // the copy that keeps the downloader's place
		}
		w.mu.Lock()
		s := w.sessions[ev.SID]
		w.mu.Unlock()
		if s != nil {
			s.mu.Lock()
			again := s.cat.Src.Get(eventlog.LocalStream) > ev.SrcSeq
			s.mu.Unlock()
			if again {
				return nil
			}
		}
		below[eventlog.LocalStream] = ev.SrcSeq
	}
	for _, stream := range w.streams() {
		if _, ok := below[stream]; ok {
			continue
		}
		// What the other stream holds now was written before the erase
		// reached us: on this machine, its lines go with the erase.
		s, err := w.js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("projection: erase %s: %w", ev.SID, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("projection: erase %s: %w", ev.SID, err)
		}
		below[stream] = info.State.LastSeq
	}
	w.mu.Lock()
	s := w.sessions[ev.SID]
	delete(w.sessions, ev.SID)
	if w.erasedBelow == nil {
		w.erasedBelow = map[string]Src{}
	}
	prev := w.erasedBelow[ev.SID]
	for stream, seq := range prev {
		below[stream] = max(below[stream], seq)
	}
	w.erasedBelow[ev.SID] = below
	// The catalog served last goes too: it holds the session's first
	// message, which must not outlive the erase in memory.
	w.catalog, w.catDirty = nil, true
	w.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		s.erased = true
		// Whoever still holds the state (the first-message read after a
		// start holds every session loaded) holds no text of it.
		s.cat.FirstMessage = ""
		w.dropTree(s)
		w.dropBodies(s)
		s.mu.Unlock()
		delete(f.dirty, s)
	}
	// Purged even when nothing was in memory: the bucket may hold views
	// from before a restart.
	if err := w.purgeSession(ctx, ev.SID); err != nil {
		return err
	}
	if s != nil {
		w.erased.Add(1)
	}
	w.subs.publish(ev)
	return nil
}

// purgeSession removes every value of the session from the bucket,
// history included: a stream purge of its keys' subjects (a KV purge
// would leave a marker per key).
func (w *Worker) purgeSession(ctx context.Context, sid string) error {
	return PurgeSession(ctx, w.js, sid)
}

// PurgeSession is purgeSession for an erase while no worker runs (the
// daemon stopped): the session leaves ls and the views at once, rather
// than at the next start. Nothing when the bucket was never made.
func PurgeSession(ctx context.Context, js jetstream.JetStream, sid string) error {
	s, err := js.Stream(ctx, "KV_"+Bucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("projection: erase %s: %w", sid, err)
	}
	subj := "$KV." + Bucket + "." + sessionPrefix + keyToken(sid) + ".>"
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("projection: erase %s: purge its views: %w", sid, err)
	}
	return nil
}

// erasedEvent reports whether ev belongs to a session erased after it.
func (w *Worker) erasedEvent(ev *eventlog.Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	below, ok := w.erasedBelow[ev.SID]
	return ok && ev.Seq <= below[ev.Stream]
}

func (w *Worker) streams() []string {
	if w.opts.All {
		return []string{eventlog.LocalStream, eventlog.AllStream}
	}
	return []string{eventlog.LocalStream}
}

// handledSeq is the last sequence of stream that its follower handled.
func (w *Worker) handledSeq(stream string) *eventlog.Handled {
	if stream == eventlog.AllStream {
		return &w.handledAll
	}
	return &w.handledLocal
}

// WaitHandled returns once the follower of stream has handled the event at
// seq (an erase event: the session is gone from the views then), or with
// an error when ctx ends first.
func (w *Worker) WaitHandled(ctx context.Context, stream string, seq uint64) error {
	if err := w.handledSeq(stream).Wait(ctx, seq); err != nil {
		return fmt.Errorf("projection: %s: %w", stream, err)
	}
	return nil
}

// ErasedBelow is, per stream, the sequence up to which the lines of
// session sid were erased (nil when it never was here, since the start):
// a snapshot read up to below that on any of them holds the erased lines
// (the web view's kept snapshots).
func (w *Worker) ErasedBelow(sid string) Src {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.erasedBelow[sid])
}
