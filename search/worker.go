package search

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Options configure a Worker.
type Options struct {
	// Node is this node's id: its PI_ALL subjects are skipped (PI_LOCAL
	// holds them already).
	Node string
	// All consumes PI_ALL too (a workstation with a hub); the stream must
	// exist before Run.
	All bool
	// BatchBytes bounds the text held before it is written to the index
	// (default 1 MiB): with the consumer's pull limit, the worker's memory
	// whatever the backlog.
	BatchBytes int
	// StartAfter, when not nil, holds back indexing until it is closed
	// (the daemon passes the tailer's Ready: the first read of a large
	// sessions tree is not slowed by indexing at the same time).
	StartAfter <-chan struct{}
	// Foreground, when set, is waited on before each batch is written
	// (foreground.Gate): a person's query goes first and the index
	// catches up after it, at most maxYield later.
	Foreground interface {
		Wait(ctx context.Context, max time.Duration) error
	}
	Logger *slog.Logger
}

// maxYield bounds how long a batch waits for foreground work to end.
const maxYield = 2 * time.Second

// maxBatchDocs bounds the documents of one batch whatever their size.
const maxBatchDocs = 4096

// liveEvery is the least time between two batches written for live lines.
// Each batch is a segment the index persists with its fsyncs and later
// merges, so a batch a line (what "write whenever caught up" gave while pi
// writes) made the index the heaviest writer of the disk: with search on,
// an append on A reached B's file in 10.8-12.0 ms at p50, 2.9-3.6 ms with
// this (docs/PERFORMANCE.md, "The search index's batches"). A line
// after a quiet second is written at once; the lines that follow it within
// the second, each read as the stream's last, wait for one batch, held in
// memory (Unindexed counts them) and read again from the stream after a
// crash, as any unwritten batch. A backlog is written once read, as before.
const liveEvery = time.Second

// Worker keeps the index up to date with the streams.
type Worker struct {
	js     jetstream.JetStream
	ix     *Index
	opts   Options
	logger *slog.Logger

	// writeMu orders a follower's batch against the other's erase: a
	// batch written before an erase is erased with the session, one
	// written after leaves out what the erase covered (erasedBelow).
	writeMu     sync.Mutex
	erasedBelow map[string]map[string]uint64 // sid → stream → sequence

	indexed, skipped, erased, batches atomic.Int64
	rebuilds                          atomic.Int64 // the index made again, found damaged
	following                         atomic.Bool  // Run's followers are running (Unindexed)
	local, all                        follower     // PI_LOCAL's and PI_ALL's
}

// follower is what one stream's follower tells the rest of the worker.
type follower struct {
	lag     atomic.Int64 // its consumer's pending after the last message read
	held    atomic.Int64 // messages read, not yet written (liveEvery)
	handled eventlog.Handled
}

// follower returns stream's follower.
func (w *Worker) follower(stream string) *follower {
	if stream == eventlog.AllStream {
		return &w.all
	}
	return &w.local
}

// NewWorker returns a worker that keeps ix up to date from the streams on
// nc; Run starts it.
func NewWorker(nc *nats.Conn, ix *Index, opts Options) (*Worker, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Worker{js: js, ix: ix, opts: opts, logger: opts.Logger, erasedBelow: map[string]map[string]uint64{}}, nil
}

// Stats are the worker's counters since it started.
type Stats struct {
	Indexed int64 `json:"docsIndexed"`
	Skipped int64 `json:"linesSkipped"` // lines with nothing to search
	Erased  int64 `json:"sessionsErased"`
	Batches int64 `json:"batches"`
	// Lag is the messages the followers have still to read or write.
	Lag int64 `json:"lag"`
	// Docs and IndexBytes are the index's documents and the size of its
	// files.
	Docs       uint64 `json:"docs"`
	IndexBytes int64  `json:"indexBytes"`
	// Rebuilds counts the index made again from the streams since the
	// start, a segment file found damaged.
	Rebuilds int64 `json:"rebuilds,omitempty"`
}

// Stats returns the counters.
func (w *Worker) Stats() Stats {
	docs, _ := w.ix.DocCount()
	return Stats{
		Indexed: w.indexed.Load(), Skipped: w.skipped.Load(), Erased: w.erased.Load(),
		Batches: w.batches.Load(), Lag: w.unwritten(), Rebuilds: w.rebuilds.Load(),
		Docs: docs, IndexBytes: w.ix.DiskBytes(),
	}
}

func (w *Worker) streams() []string {
	if w.opts.All {
		return []string{eventlog.LocalStream, eventlog.AllStream}
	}
	return []string{eventlog.LocalStream}
}

// Run follows the streams until ctx ends. A follower that fails reads
// again from the index's position after a pause; Run itself ends only with
// ctx.
func (w *Worker) Run(ctx context.Context) error {
	if w.opts.StartAfter != nil {
		select {
		case <-w.opts.StartAfter:
		case <-ctx.Done():
			return nil
		}
	}
	if err := w.checkStreams(ctx); err != nil {
		// Not fatal: the index stays, and is checked again at the next start;
		// the followers count what they read.
		w.logger.Warn("search: could not check the index against the streams", "err", err)
	}
	if w.ix.Rebuilt && w.ix.Why != "" {
		w.logger.Info("search index rebuilt from the streams", "why", w.ix.Why)
	}
	why, err := w.ix.Damage(ctx)
	if err != nil && ctx.Err() == nil {
		w.logger.Warn("search: could not check the index's files", "err", err)
	}
	for ctx.Err() == nil {
		if why != "" {
			w.rebuild(ctx, why)
		}
		why = w.followUntilDamaged(ctx)
	}
	return nil
}

// checkAfter is the least time between two checks of the index's files
// (Index.Damage, which reads them all) for failures it reported: a full
// disk fails every batch.
const checkAfter = time.Minute

// followUntilDamaged runs the followers until ctx ends, or until a check
// of the index's files, after a failure it reported, finds one damaged:
// it then stops them and says what is damaged.
func (w *Worker) followUntilDamaged(ctx context.Context) (damage string) {
	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
	}()
	w.following.Store(true)
	defer w.following.Store(false)
	for _, s := range w.streams() {
		wg.Go(func() { w.follow(fctx, s) })
	}
	var checked time.Time
	var due <-chan time.Time // a check waits for checkAfter
	for {
		select {
		case <-ctx.Done():
			return ""
		case <-w.ix.Suspect():
			if due == nil {
				due = time.After(checkAfter - time.Since(checked))
			}
		case <-due:
			due, checked = nil, time.Now()
			why, err := w.ix.Damage(ctx)
			if err != nil {
				w.logger.Debug("search: could not check the index's files", "err", err)
			}
			if why != "" {
				return why
			}
		}
	}
}

// rebuild makes the index again, empty, and counts what each stream holds
// as still to index (checkStreams, as at a start: the positions are 0):
// the followers then read the streams from their start.
func (w *Worker) rebuild(ctx context.Context, why string) {
	w.logger.Warn("search: the index is damaged: making it again from the streams (searches find less until it has caught up)", "why", why)
	if err := w.ix.Reset("damaged: " + why); err != nil {
		// The index stays broken: its next use tries to make it again.
		w.logger.Error("search: could not make the index again", "err", err)
		return
	}
	w.rebuilds.Add(1)
	if err := w.checkStreams(ctx); err != nil && ctx.Err() == nil {
		w.logger.Warn("search: could not check the index against the streams", "err", err)
	}
}

// checkStreams reads each stream's end once. A position past it empties
// the index: the store under the index was made afresh, and what the index
// holds is not in it. Each follower's count starts as what its stream
// holds past the index's position: until a follower reads its first
// message and counts what is pending after it, a search in that moment
// would otherwise read as if the index had every line.
func (w *Worker) checkStreams(ctx context.Context) error {
	streams := w.streams()
	pos := make([]uint64, len(streams))
	last := make([]uint64, len(streams))
	why := ""
	for i, stream := range streams {
		var err error
		if last[i], err = w.lastSeq(ctx, stream); err != nil {
			return err
		}
		if pos[i], err = w.ix.Position(stream); err != nil {
			pos[i] = 0 // an unreadable position reads the stream again
		}
		if pos[i] > last[i] && why == "" {
			why = fmt.Sprintf("indexed %s up to %d, the stream ends at %d", stream, pos[i], last[i])
		}
	}
	if why != "" {
		if err := w.ix.Reset(why); err != nil {
			return err
		}
		clear(pos) // an index made afresh reads every stream from its start
	}
	for i, stream := range streams {
		w.follower(stream).lag.Store(int64(last[i] - pos[i]))
	}
	return nil
}

// lastSeq is the last sequence stream holds.
func (w *Worker) lastSeq(ctx context.Context, stream string) (uint64, error) {
	s, err := w.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("search: %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("search: %s: %w", stream, err)
	}
	return info.State.LastSeq, nil
}

// follow consumes one stream until ctx ends, restarting after failures
// with backoff (eventlog.RunSessions: failures logged now and then, and
// the first batch written after them logged as the recovery).
func (w *Worker) follow(ctx context.Context, stream string) {
	link := eventlog.NewLink(w.logger.With("stream", stream), "search indexing")
	var progress atomic.Int64 // batches written
	eventlog.RunSessions(ctx, link, &progress, func(ctx context.Context) error {
		return w.consume(ctx, stream, link, &progress)
	})
}

// pending is a document waiting for its batch, with the sequence of its
// line (an erase between the line and the batch leaves it out).
type pending struct {
	doc Doc
	seq uint64
}

// consume indexes the stream from the index's position on, writing a batch
// whenever it holds BatchBytes, or has read a backlog to its end, or has
// caught up with live lines and wrote none for liveEvery (else once
// liveEvery is up). Each batch written counts
// in progress and says the link is up.
func (w *Worker) consume(ctx context.Context, stream string, link *eventlog.Link, progress *atomic.Int64) error {
	pos, err := w.ix.Position(stream)
	if err != nil {
		return err
	}
	it, err := eventlog.Follow(ctx, w.js, stream, pos, 8<<20)
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	defer it.Stop()
	f := w.follower(stream)
	// Lines read and not written are read again by the next consume:
	// until it reads them, they count as the consumer's (a batch that
	// failed on a full disk counted as indexed between two attempts).
	defer func() { f.lag.Add(f.held.Swap(0)) }()
	// What the index holds was read before: a waiter for it must not wait
	// for a new message.
	f.handled.Advance(pos)
	asm := eventlog.NewAssemblers(false)
	var batch []pending
	bytes := 0
	var read uint64     // the last message read
	var wrote time.Time // when the last batch was written
	behind := false     // a message of the batch came with more pending: a backlog
	// wake is closed when a held batch is due (nil: none is held).
	var wake chan struct{}
	var due *time.Timer
	defer func() {
		if due != nil {
			due.Stop()
		}
	}()
	flush := func(last uint64) error {
		done := last
		if p := asm.PendingStart(); p > 0 {
			done = min(done, p-1) // a split line still missing chunks
		}
		if done <= pos {
			done = 0 // position unchanged
		}
		if len(batch) == 0 && done == 0 {
			return nil
		}
		if w.opts.Foreground != nil {
			if err := w.opts.Foreground.Wait(ctx, maxYield); err != nil {
				return err
			}
		}
		if err := w.write(stream, batch, done); err != nil {
			return err
		}
		if done > 0 {
			pos = done
		}
		progress.Add(1)
		link.Up()
		batch, bytes = batch[:0], 0
		f.held.Store(0)
		wrote, behind = time.Now(), false
		if due != nil {
			due.Stop()
			due, wake = nil, nil
		}
		return nil
	}
	for {
		msg, woke, err := it.NextOr(ctx, wake)
		if err != nil {
			return fmt.Errorf("search: read %s: %w", stream, err)
		}
		if woke {
			if err := flush(read); err != nil {
				return err
			}
			continue
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("search: read %s: %w", stream, err)
		}
		seq := meta.Sequence.Stream
		ev := w.assemble(stream, asm, msg, seq)
		if ev != nil && ev.Op == eventlog.OpErase {
			// Everything read before the erase is written first, so that
			// the erase removes it with the rest.
			if err := flush(seq - 1); err != nil {
				return err
			}
			if err := w.erase(ctx, ev); err != nil {
				return err
			}
		} else if ev != nil && ev.Op == "" {
			if d, ok := Extract(ev.Raw); ok {
				d.SessionID, d.Node = ev.SID, ev.Node
				batch = append(batch, pending{d, seq})
				bytes += len(d.Text) + 256
			} else {
				w.skipped.Add(1)
			}
		}
		read = seq
		f.handled.Store(seq)
		f.lag.Store(int64(meta.NumPending))
		f.held.Add(1) // until the batch it is in is written (flush)
		switch {
		case bytes >= w.opts.BatchBytes || len(batch) >= maxBatchDocs:
			err = flush(seq)
		case meta.NumPending > 0:
			behind = true // a backlog: written once read or at BatchBytes
		case behind || time.Since(wrote) >= liveEvery:
			// A backlog read to its end is written then, as its readers
			// (the daemon's quiet start) expect.
			err = flush(seq)
		default:
			if due == nil {
				c := make(chan struct{})
				wake, due = c, time.AfterFunc(liveEvery-time.Since(wrote), func() { close(c) })
			}
		}
		if err != nil {
			return err
		}
	}
}

// assemble returns the event msg completes, nil when there is none or it
// is not to be indexed from this stream.
func (w *Worker) assemble(stream string, asm *eventlog.Assemblers, msg jetstream.Msg, seq uint64) *eventlog.Event {
	subj := msg.Subject()
	node, sid, err := eventlog.ParseSubject(subj)
	if err != nil {
		return nil
	}
	if stream == eventlog.AllStream && node == w.opts.Node {
		// This node's own lines and erases come back through the hub:
		// PI_LOCAL has them, and the PI_LOCAL follower handled them.
		return nil
	}
	ev, err := asm.Add(stream, subj, seq, msg.Headers(), msg.Data())
	if err != nil {
		w.logger.Warn("search: skipping an unreadable message", "stream", stream, "subject", subj, "seq", seq, "err", err)
		return nil
	}
	if ev != nil {
		ev.SID = sid
		if ev.Op == "" && len(ev.Raw) == 0 {
			return nil
		}
	}
	return ev
}

// write writes a batch and the stream's position (0: unchanged), leaving
// out documents of sessions erased after their line.
func (w *Worker) write(stream string, batch []pending, pos uint64) error {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	docs := make([]Doc, 0, len(batch))
	for _, p := range batch {
		if below, ok := w.erasedBelow[p.doc.SessionID]; ok && p.seq <= below[stream] {
			continue
		}
		docs = append(docs, p.doc)
	}
	if err := w.ix.Write(docs, stream, pos); err != nil {
		return err
	}
	w.indexed.Add(int64(len(docs)))
	w.batches.Add(1)
	return nil
}

// erase removes ev's session from the index. Lines of it that a stream
// delivers later but that were stored before the erase reached us (the
// other stream may be behind) are left out: erasedBelow keeps, per
// session, the sequences up to which its lines are gone. Lines after them
// are a new session.
func (w *Worker) erase(ctx context.Context, ev *eventlog.Event) error {
	below := map[string]uint64{ev.Stream: ev.Seq}
	for _, stream := range w.streams() {
		if stream == ev.Stream {
			continue
		}
		s, err := w.js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("search: erase %s: %w", ev.SID, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("search: erase %s: %w", ev.SID, err)
		}
		below[stream] = info.State.LastSeq
	}
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	for stream, seq := range w.erasedBelow[ev.SID] {
		below[stream] = max(below[stream], seq)
	}
	w.erasedBelow[ev.SID] = below
	n, err := w.ix.EraseSession(ctx, ev.SID)
	if err != nil {
		return err
	}
	w.erased.Add(1)
	w.logger.Info("search: session erased from the index", "session", ev.SID, "documents", n)
	return nil
}

// Unindexed returns how many messages of the streams the index has yet to
// read or write: while the followers run, what their consumers have
// pending and what they read into a batch not yet written; before
// (the daemon starts them after the first read's projection), what the
// streams hold past the index's positions.
func (w *Worker) Unindexed(ctx context.Context) (int64, error) {
	if w.following.Load() {
		// Not the positions: a message deleted before it was read (an
		// erase) would count for ever.
		return w.unwritten(), nil
	}
	var n int64
	for _, stream := range w.streams() {
		pos, err := w.ix.Position(stream)
		if err != nil {
			return 0, err
		}
		last, err := w.lastSeq(ctx, stream)
		if err != nil {
			return 0, err
		}
		if last > pos {
			n += int64(last - pos)
		}
	}
	return n, nil
}

// unwritten is what the running followers have yet to read or write:
// their consumers' pending and what they hold for a batch.
func (w *Worker) unwritten() int64 {
	return w.local.lag.Load() + w.all.lag.Load() + w.local.held.Load() + w.all.held.Load()
}

// WaitHandled returns once the follower of stream has read the message at
// seq (an erase: its session is gone from the index then), or with an
// error when ctx ends first.
func (w *Worker) WaitHandled(ctx context.Context, stream string, seq uint64) error {
	if err := w.follower(stream).handled.Wait(ctx, seq); err != nil {
		return fmt.Errorf("search: %s: %w", stream, err)
	}
	return nil
}
