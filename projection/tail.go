package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// TailEntry is one entry (or control event) of a session as it arrives.
type TailEntry struct {
	Session  string          `json:"session"`
	Node     string          `json:"node"`
	Stream   string          `json:"stream"`
	Seq      uint64          `json:"seq"`
	ID       string          `json:"entryId,omitempty"`
	ParentID string          `json:"parentId,omitempty"`
	Type     string          `json:"type,omitempty"`
	Op       string          `json:"op,omitempty"` // "delete": a tombstone; "erase": the session was erased
	File     string          `json:"file,omitempty"`
	Entry    json.RawMessage `json:"entry,omitempty"`
}

// TailOptions select what Tail follows.
type TailOptions struct {
	Session   string // "" for every session
	Type      string // "" for every type; "tombstone" for deletions
	FromStart bool   // replay what the streams hold first
	// After resumes a reader: what the streams hold after these positions
	// (per stream, the Seq of the last entry it had; a stream missing is
	// read from its start) is replayed first, then live entries follow,
	// with no entry lost or repeated in between.
	After Src
}

func (o *TailOptions) match(ev *eventlog.Event) bool {
	return (o.Session == "" || o.Session == ev.SID) && (o.Type == "" || o.Type == ev.Type)
}

func newTailEntry(ev *eventlog.Event) TailEntry {
	e := TailEntry{
		Session: ev.SID, Node: ev.Node, Stream: ev.Stream, Seq: ev.Seq, ID: ev.ID,
		ParentID: ev.ParentID, Type: ev.Type, Op: ev.Op, File: ev.File,
	}
	if raw := session.ToValidUTF8(ev.Raw); json.Valid(raw) {
		e.Entry = raw
	}
	return e
}

// ErrSlowSubscriber ends a Tail whose reader fell more than tailBuffer
// entries behind: the worker never waits for a reader and never queues
// without bound.
var ErrSlowSubscriber = errors.New("projection: tail reader too slow; entries dropped")

const tailBuffer = 1024

type subscriber struct {
	opts TailOptions
	ch   chan TailEntry
	gone chan struct{} // closed when dropped (overflow or worker stop)
	err  error
	// seen: per stream, the sequence up to which the reader has had
	// every event, or is not to have them (set once Tail knows it); they
	// are not queued, so a catch-up's backlog cannot fill the buffer.
	seen map[string]uint64
}

// subscribers fans applied events out to Tail readers.
// ErrStopped ends a tail whose worker stopped: the daemon is stopping.
var ErrStopped = errors.New("pisyncd stopped")

type subscribers struct {
	mu   sync.Mutex
	set  map[*subscriber]struct{}
	done bool
}

func (ss *subscribers) add(o TailOptions) *subscriber {
	s := &subscriber{opts: o, ch: make(chan TailEntry, tailBuffer), gone: make(chan struct{})}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.done {
		s.err = ErrStopped
		close(s.gone)
		return s
	}
	if ss.set == nil {
		ss.set = map[*subscriber]struct{}{}
	}
	ss.set[s] = struct{}{}
	return s
}

func (ss *subscribers) remove(s *subscriber) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, ok := ss.set[s]; ok {
		delete(ss.set, s)
		close(s.gone)
	}
}

// setSeen sets s.seen (see there).
func (ss *subscribers) setSeen(s *subscriber, seen map[string]uint64) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.seen = seen
}

// publish hands an applied event to every matching reader, dropping a
// reader whose buffer is full.
func (ss *subscribers) publish(ev *eventlog.Event) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for s := range ss.set {
		if !s.opts.match(ev) || ev.Seq <= s.seen[ev.Stream] {
			continue
		}
		select {
		case s.ch <- newTailEntry(ev):
		default:
			s.err = ErrSlowSubscriber
			delete(ss.set, s)
			close(s.gone)
		}
	}
}

func (ss *subscribers) closeAll() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.done = true
	for s := range ss.set {
		s.err = ErrStopped
		delete(ss.set, s)
		close(s.gone)
	}
}

// Tail calls fn for every entry the worker applies from now on, and with
// FromStart first for what the streams already hold, until ctx ends (nil)
// or fn fails. Entries come once each, in stream order per stream.
func (w *Worker) Tail(ctx context.Context, o TailOptions, fn func(TailEntry) error) error {
	select {
	case <-w.ready:
	case <-ctx.Done():
		return nil
	}
	sub := w.subs.add(o)
	defer w.subs.remove(sub)
	// Replayed up to these sequences; live events at or below them were
	// replayed already.
	upTo := map[string]uint64{}
	if !o.FromStart && o.After == nil {
		// From now: what the streams hold already is not new, though
		// the projection may apply it only now (catching up after a
		// restart, a kill -9's whole backlog): the tail printed
		// thousands of old entries, then was dropped as too slow (a
		// probe, 2026-12-07).
		for stream := range w.tailFilters(o.Session) {
			s, err := w.js.Stream(ctx, stream)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("projection: tail: %w", err)
			}
			upTo[stream] = s.CachedInfo().State.LastSeq
		}
	}
	if o.FromStart || o.After != nil {
		if err := w.replay(ctx, o, upTo, fn); err != nil || ctx.Err() != nil {
			return err
		}
	}
	w.subs.setSeen(sub, upTo)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-sub.ch:
			if e.Seq <= upTo[e.Stream] {
				continue
			}
			if err := fn(e); err != nil {
				return err
			}
		case <-sub.gone:
			// Deliver what was buffered before the drop, then report it.
			for {
				select {
				case e := <-sub.ch:
					if e.Seq > upTo[e.Stream] {
						if err := fn(e); err != nil {
							return err
						}
					}
				default:
					w.subs.mu.Lock()
					err := sub.err
					w.subs.mu.Unlock()
					return err
				}
			}
		}
	}
}

func (w *Worker) tailFilters(sid string) map[string]string {
	if sid != "" {
		return w.filters(sid)
	}
	f := map[string]string{eventlog.LocalStream: eventlog.LocalPrefix + ".>"}
	if w.opts.All {
		f[eventlog.AllStream] = eventlog.AllPrefix + ".>"
	}
	return f
}

// tailReplays bounds the tails that replay what the streams hold at once
// (from the start, or after a reader's position); the others wait for one
// to end. Each reads through a buffer of up to 8 MiB, and 150 tails from
// the start that did not read on held the daemon at 965 MB (a probe,
// 2026-12-07).
const tailReplays = 8

// replay gives fn what the streams hold of o's entries, after o.After (or
// from the start), and notes in upTo where each stream's replay ended.
func (w *Worker) replay(ctx context.Context, o TailOptions, upTo map[string]uint64, fn func(TailEntry) error) error {
	select {
	case w.replaySlots <- struct{}{}:
		defer func() { <-w.replaySlots }()
	case <-ctx.Done():
		return nil
	}
	for stream, filter := range w.tailFilters(o.Session) {
		s, err := w.js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("projection: tail: %w", err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("projection: tail: %w", err)
		}
		upTo[stream] = info.State.LastSeq
		from := o.After[stream] + 1
		if info.State.LastSeq < from {
			// Nothing new; live entries at or below the reader's
			// position are skipped as replayed.
			upTo[stream] = max(info.State.LastSeq, o.After[stream])
			continue
		}
		err = eventlog.ReadFilteredFrom(ctx, w.js, stream, filter, from, info.State.LastSeq, false, func(ev *eventlog.Event) error {
			if stream == eventlog.AllStream && ev.Node == w.opts.Node {
				return nil
			}
			if !o.match(ev) {
				return nil
			}
			return fn(newTailEntry(ev))
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("projection: tail: %w", err)
		}
	}
	return nil
}
