package projection

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// flushEvery bounds how many events are applied before views are written
// during a catch-up; when the stream is drained they are written at once.
const flushEvery = 4096

// follower is the state of one stream's consumption that survives a
// consumer restart: sessions whose views are not written yet.
type follower struct {
	stream string
	dirty  map[*sessionState]struct{}
	saved  uint64 // position last saved
	// link is up once views are written: the first write after failures
	// is logged as the recovery. progress counts positions saved.
	link     *eventlog.Link
	progress atomic.Int64
}

// follow consumes one stream until ctx ends, restarting the consumer
// after failures with backoff (eventlog.RunSessions). A consumer that saved
// a position before it failed starts the back-off over: each outage (a
// full disk, the embedded server restarted) is waited out from the
// shortest pause and logged once, not paced by the ones before it.
func (w *Worker) follow(ctx context.Context, stream string) {
	f := &follower{stream: stream, dirty: map[*sessionState]struct{}{},
		link: eventlog.NewLink(w.logger.With("stream", stream), "projection")}
	eventlog.RunSessions(ctx, f.link, &f.progress, func(ctx context.Context) error { return w.consume(ctx, f) })
}

func (w *Worker) loadPos(ctx context.Context, stream string) (uint64, error) {
	e, err := w.kv.Get(ctx, posKey(stream))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("projection: position of %s: %w", stream, err)
	}
	return strconv.ParseUint(string(e.Value()), 10, 64)
}

// consume reads the stream from the saved position and applies events,
// writing views whenever the consumer has caught up (or every flushEvery
// events) and then the position.
func (w *Worker) consume(ctx context.Context, f *follower) error {
	pos, err := w.loadPos(ctx, f.stream)
	if err != nil {
		return err
	}
	f.saved = pos
	// What the saved position covers was handled by a consumer before this
	// one: a waiter for it (the daemon starts the search index after the
	// first read's projection) must not wait for a new message.
	w.handledSeq(f.stream).Advance(pos)
	// Bounded by bytes: a message is up to a chunk (256 KiB), and 1024 of
	// them would be 256 MiB buffered here.
	it, err := eventlog.Follow(ctx, w.js, f.stream, pos, bodyBytes)
	if err != nil {
		return fmt.Errorf("projection: %w", err)
	}
	defer func() { it.Stop() }()
	asm := eventlog.NewAssemblers(false)
	var last uint64
	n := 0
	// Until WriteAfter closes, catching up does not write the views:
	// every flushEvery events do, and its closing does.
	hold := w.opts.WriteAfter
	var held int64               // bytes taken while hold is open
	heldBy := map[string]int64{} // and of each subject (session)
	for {
		var wake <-chan struct{}
		if n > 0 {
			wake = hold
		}
		msg, woke, err := it.NextOr(ctx, wake)
		if err != nil {
			return fmt.Errorf("projection: read %s: %w", f.stream, err)
		}
		if hold != nil && closed(hold) {
			hold, heldBy = nil, nil // woke is true when it closed while waiting
		}
		if woke {
			if err := w.flush(ctx, f, asm, last); err != nil {
				return err
			}
			n = 0
			continue
		}
		if hold != nil {
			subj, size := msg.Subject(), len(msg.Data())
			held += int64(size)
			heldBy[subj] += int64(size)
			if w.overlapEnds(held, heldBy[subj], size) {
				from := pos
				if last > 0 {
					from = last
				}
				if it, err = w.followAfter(ctx, f, it, hold, from); err != nil {
					return err
				}
				hold, heldBy = nil, nil
				continue // the new consumer delivers msg again
			}
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("projection: read %s: %w", f.stream, err)
		}
		last = meta.Sequence.Stream
		if err := w.handle(ctx, f, asm, msg, last); err != nil {
			return err
		}
		w.handledSeq(f.stream).Store(last)
		n++
		if (meta.NumPending == 0 && hold == nil) || n >= flushEvery {
			if err := w.flush(ctx, f, asm, last); err != nil {
				return err
			}
			n = 0
		}
	}
}

// followAfter stops it, and with it what it would have read ahead, waits
// for hold to close, and follows the stream again after from.
func (w *Worker) followAfter(ctx context.Context, f *follower, it *eventlog.Follower, hold <-chan struct{}, from uint64) (*eventlog.Follower, error) {
	it.Stop()
	select {
	case <-hold:
	case <-ctx.Done():
		return it, context.Cause(ctx)
	}
	next, err := eventlog.Follow(ctx, w.js, f.stream, from, bodyBytes)
	if err != nil {
		return it, fmt.Errorf("projection: %w", err)
	}
	return next, nil
}

// While WriteAfter is open a follower applies small sessions only: it
// stops, and waits for it to close, at a message longer than overlapLine
// (a chunk of an image, a long tool output) or one that takes its session
// past overlapSession bytes. A large session's tree and the garbage of
// applying it are large, and held alongside the tailer's and the store's
// memory they raise the first read's peak (docs/PERFORMANCE.md).
const (
	overlapLine    = 64 << 10
	overlapSession = 1 << 20
)

// overlapEnds reports whether a follower that has taken held bytes while
// WriteAfter is open, session of them for the last message's session and
// size for the message itself, waits for it to close before applying it.
func (w *Worker) overlapEnds(held, session int64, size int) bool {
	return size > overlapLine || session > overlapSession ||
		(w.opts.WriteAfterBytes > 0 && held > w.opts.WriteAfterBytes)
}

// handle applies one message.
func (w *Worker) handle(ctx context.Context, f *follower, asm *eventlog.Assemblers, msg jetstream.Msg, seq uint64) error {
	subj := msg.Subject()
	node, sid, err := eventlog.ParseSubject(subj)
	if err != nil {
		return nil // not an event subject: nothing to project
	}
	if f.stream == eventlog.AllStream && node == w.opts.Node && msg.Headers().Get(eventlog.HdrOp) != eventlog.OpErase {
		// Our own lines, applied from PI_LOCAL. Our own erase events
		// are not skipped: lines of the session that came into PI_ALL
		// meanwhile go with them.
		return nil
	}
	ev, err := asm.Add(f.stream, subj, seq, msg.Headers(), msg.Data())
	if err != nil {
		w.logger.Warn("projection: skipping an unreadable message", "stream", f.stream, "subject", subj, "seq", seq, "err", err)
		return nil
	}
	if ev == nil {
		return nil
	}
	ev.SID = sid
	if ev.Op == eventlog.OpErase {
		return w.erase(ctx, f, ev)
	}
	return w.applyEvent(ctx, f, ev)
}

func (w *Worker) applyEvent(ctx context.Context, f *follower, ev *eventlog.Event) error {
	if w.erasedEvent(ev) {
		w.skipped.Add(1) // its session was erased after it
		return nil
	}
	s := w.lookup(ev.SID, true)
	s.mu.Lock()
	for s.erased {
		// Dropped by the other follower while we waited: the session
		// starts afresh.
		s.mu.Unlock()
		s = w.lookup(ev.SID, true)
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	if s.applied(ev) {
		w.skipped.Add(1)
		return nil
	}
	if err := w.ensureTree(ctx, s); err != nil {
		return err
	}
	same := w.noteCollision(ctx, s, ev)
	s.apply(ev, &w.names, same)
	w.cacheBody(s, ev)
	w.applied.Add(1)
	f.dirty[s] = struct{}{}
	w.subs.publish(ev)
	return nil
}

// noteCollision records, in the catalog, a line whose entry id the session
// holds already with other bytes: both lines stay in the streams (pi's
// later-line-wins rule applies in the views), and ls names both origins.
// It reports whether the line is the very line the tree holds (the same
// id and sha-256): one session file on two machines, each of which
// published it as its own (copied before pisyncd ran, or a new state dir
// over old files). Every file holds that line once, so the tree must too.
func (w *Worker) noteCollision(ctx context.Context, s *sessionState, ev *eventlog.Event) (same bool) {
	if ev.Op != "" || ev.ID == "" || ev.Type == "session" {
		return false
	}
	i, ok := s.tree.Find(ev.ID)
	if !ok {
		return false
	}
	first, sha, ok := w.refLine(ctx, s.tree.Entry(i).Ref)
	if ok && sha == ev.Sha {
		return true
	}
	if len(s.cat.Collisions) < maxCollisions {
		s.cat.Collisions = append(s.cat.Collisions, Collision{ID: ev.ID, Nodes: [2]string{first, ev.Node}})
	}
	return false
}

// refLine reads the line at ref back from its stream (rare: only for an id
// the session holds already): the node that published it (this node for
// PI_LOCAL, the subject's node for PI_ALL) and its Pi-Sha. ok is false when
// the message cannot be read or carries no sha; the node may still be set.
func (w *Worker) refLine(ctx context.Context, ref session.Ref) (node string, sha [32]byte, ok bool) {
	name := refStream(ref)
	if name == eventlog.LocalStream {
		node = w.opts.Node
	}
	st, err := w.js.Stream(ctx, name)
	if err != nil {
		return node, sha, false
	}
	m, err := st.GetMsg(ctx, refSeq(ref))
	if err != nil {
		return node, sha, false
	}
	if name == eventlog.AllStream {
		node, _, _ = eventlog.ParseSubject(m.Subject)
	}
	sha, err = eventlog.ParseSha(m.Header.Get(eventlog.HdrSha))
	return node, sha, err == nil
}

// flush writes the views of the dirty sessions, then the stream position
// up to last (before any split line still missing chunks).
func (w *Worker) flush(ctx context.Context, f *follower, asm *eventlog.Assemblers, last uint64) error {
	// The values are published without waiting for each one's ack (one
	// round trip per value made a catch-up of 10,000 sessions wait ~50,000
	// times); the acks are all awaited before the position is saved.
	pipe := &kvPipe{}
	for s := range f.dirty {
		if err := w.writeViews(ctx, s, pipe); err != nil {
			pipe.abandon()
			return err
		}
	}
	if err := pipe.wait(ctx); err != nil {
		return err
	}
	clear(f.dirty)
	w.flushes.Add(1)
	w.mu.Lock()
	w.catDirty = true
	w.mu.Unlock()
	done := last
	if p := asm.PendingStart(); p > 0 {
		done = min(done, p-1)
	}
	if done > f.saved {
		if _, err := w.kv.Put(ctx, posKey(f.stream), []byte(strconv.FormatUint(done, 10))); err != nil {
			return fmt.Errorf("projection: save position of %s: %w", f.stream, err)
		}
		f.saved = done
		f.progress.Add(1)
	}
	f.link.Up()
	w.evict()
	return nil
}

// writeViewsNow writes what changed of the session's values and waits for
// the writes.
func (w *Worker) writeViewsNow(ctx context.Context, s *sessionState) error {
	pipe := &kvPipe{}
	if err := w.writeViews(ctx, s, pipe); err != nil {
		pipe.abandon()
		return err
	}
	return pipe.wait(ctx)
}

// writeViews publishes what changed of the session's values.
func (w *Worker) writeViews(ctx context.Context, s *sessionState, pipe *kvPipe) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.erased {
		return nil
	}
	if s.tree == nil {
		if err := w.ensureTree(ctx, s); err != nil {
			return err
		}
	}
	oldPages := s.cat.CtxPages
	vals, pages := s.buildViews(w.viewSeed, &w.names, w.opts.MapCwd)
	for _, v := range vals {
		if s.written.get(v.slot) == v.hash {
			continue
		}
		data := v.data()
		if len(data) > maxValue {
			data = fit(data)
		}
		if len(data) > maxValue {
			return fmt.Errorf("projection: %s: value of %d bytes over the limit", v.key, len(data))
		}
		// Published while s.mu is held: two writers of one session put
		// its values in the order they built them.
		fut, err := w.js.PublishAsync(kvSubject(v.key), data)
		if err != nil {
			return fmt.Errorf("projection: write %s: %w", v.key, err)
		}
		pipe.add(s, v.key, v.slot, fut)
		w.writes.Add(1)
		s.written.set(v.slot, v.hash)
	}
	// Pages past the new end (the window shrank, e.g. after a compaction).
	for p := pages; p < oldPages; p++ {
		key := pageKey(s.sid, p)
		if err := w.kv.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("projection: drop %s: %w", key, err)
		}
		s.written.forget(slotPage0 + p)
	}
	return nil
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
