package replicate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Tracker is this machine's tailer as the replicator sees it.
type Tracker interface {
	// FilesFor lists the local files that hold a session.
	FilesFor(sid string) []string
	// Learn tells the tailer that a line is already in the event log, so
	// that it does not publish the line again when it sees it in a file.
	Learn(sid string, sha [32]byte)
	// Forget tells the tailer that a file is moved away by the replicator:
	// its disappearance is no deletion to publish. undo takes that back
	// when the move failed.
	Forget(path string) (undo func())
	// Remove unlinks files of a session being erased, and returns once the
	// tailer has let go of them (nothing of them published any more).
	Remove(ctx context.Context, paths []string) error
}

// Options configure a Replicator.
type Options struct {
	Root    string // pi's sessions dir
	Node    string // this node: its own events are never written back
	PathMap PathMap
	// KeepDeleted: a remote deletion leaves the local copy alone
	// (PISYNC_DELETE=ignore) instead of moving it to the trash folder.
	KeepDeleted bool
	// Trusted lists the nodes whose lines are written into any session
	// here; nil trusts every node of the team. Another node's lines are
	// written only into the sessions it began (its header): it cannot
	// steer what a session begun elsewhere resumes from.
	Trusted []string
	// Idle is how long a file must be quiet before remote lines are
	// appended to it: pi appends without locks, so we wait for a pause.
	Idle   time.Duration
	Logger *slog.Logger
	// Erased, when set, learns of every session erased here for another
	// machine's erase event (end-to-end encryption drops its data keys and
	// destroys this node's key messages of the session on the hub); not
	// of this node's own erase events, whose key message must stay. seq
	// is the erase event's PI_ALL sequence, the same when it is replayed;
	// an error applies the event again.
	Erased func(sid string, seq uint64) error
}

// TrashDir is the folder under the sessions root that deleted replicas are
// moved to. Its dot name keeps pi and the tailer out of it.
const TrashDir = ".pisyncd-trash"

// Replicator writes other nodes' events into native pi files.
type Replicator struct {
	opts    Options
	all     *eventlog.All
	state   jetstream.KeyValue
	tracker Tracker
	logger  *slog.Logger
	link    *eventlog.Link // whether its consumer works; logs outages and their end
	now     func() time.Time

	// Owned by the Run goroutine.
	sessions map[string]*sess
	files    map[string]*replica
	nodes    map[string]string // intern
	swept    time.Time         // the last sweep (evict.go)
	knownCap int               // maxKnownLines; a test's less
	letGoOf  map[string]letGo  // sessions let go of with a file here (evict.go)

	mu            sync.Mutex
	forkSIDs      map[string]struct{}
	quarantined   map[string]string // session → why
	collisionList []Collision

	filesCreated, linesWritten, rejected, trashed atomic.Int64
	restored, erasedRemote, erasedLines           atomic.Int64
	collisions, waiting, deferred, refused        atomic.Int64
	untrusted, migrated, kept, rejoined           atomic.Int64

	// Copies moved to the trash, by their old name, and when their names
	// were last looked at (rejoin.go). Owned by the Run goroutine.
	trashedCopies map[string]trashedCopy
	rejoinedAt    time.Time

	// eraseMu is held by a write round and by Hold; holds (session →
	// PI_ALL sequence when its erase here began) are read from the state
	// bucket once (erase.go).
	eraseMu sync.Mutex
	holds   map[string]uint64

	// startPos is the saved position the current run resumed from: the
	// lines up to it were written before, by this run's predecessors.
	startPos uint64
	// readPos is the last event of PI_ALL the run has read: what follows
	// comes through its consumer. Owned by the Run goroutine.
	readPos uint64
	// headerless are the sessions recorded as waiting for their header
	// (headerless.go); headerlessFull says the log said there are more.
	// Owned by the Run goroutine.
	headerless     map[string]bool
	headerlessFull bool
	headerlessN    atomic.Int64 // len(headerless), for Stats
	// failing counts the sessions whose writes fail and are retried (a
	// full disk), failingErr the last error of one: for Stats, from the
	// Run goroutine, which owns the sessions.
	failing    atomic.Int64
	failingErr atomic.Pointer[string]
	letGo      atomic.Int64 // sessions let go of (evict.go)
	partial    atomic.Pointer[partialWait]
}

// partialWait is the sessions whose lines wait for a partial line of
// their file here to end, as the last flush counted them.
type partialWait struct {
	n       int64
	example string
}

// maxListed bounds the collisions and quarantined sessions kept for status.
const maxListed = 50

// Collision is an entry id two lines of a session claim: the first
// origin's line is in the file here, the second's only in the event log.
type Collision struct {
	Session string    `json:"session"`
	ID      string    `json:"id"`
	Nodes   [2]string `json:"nodes"`
}

// New returns a replicator reading all.
func New(all *eventlog.All, state jetstream.KeyValue, tracker Tracker, o Options) *Replicator {
	if o.Idle <= 0 {
		o.Idle = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Replicator{
		opts: o, all: all, state: state, tracker: tracker, logger: o.Logger, link: eventlog.NewLink(o.Logger, "replication"), now: time.Now,
		sessions: map[string]*sess{}, files: map[string]*replica{}, nodes: map[string]string{}, letGoOf: map[string]letGo{}, knownCap: maxKnownLines, forkSIDs: map[string]struct{}{},
		quarantined: map[string]string{}, trashedCopies: map[string]trashedCopy{},
	}
}

// SetTracker sets the tailer (which is created after the replicator, as it
// needs the replicator's KnownLines). Call it before Run.
func (r *Replicator) SetTracker(t Tracker) { r.tracker = t }

// Stats are the replicator's counters.
type Stats struct {
	FilesCreated int64 `json:"filesCreated"`
	LinesWritten int64 `json:"linesWritten"`
	Waiting      int64 `json:"linesWaiting"`
	// WaitingForHeader counts the sessions whose lines wait for a header
	// that has not come here (headerless.go): a teammate's session begun
	// before this machine could read it, or never sent whole.
	WaitingForHeader int64 `json:"sessionsWaitingForHeader,omitempty"`
	Deferred         int64 `json:"deferredWhilePiWrites"`
	Rejected         int64 `json:"rejectedUnsafe"`
	Trashed          int64 `json:"filesTrashed"`
	// KeptWritten counts sessions deleted on another machine that a local
	// pi wrote again before their copy here went to the trash: kept.
	KeptWritten int64 `json:"deletedButWrittenHere,omitempty"`
	// Rejoined counts copies of sessions deleted on another machine that
	// a local pi wrote to after they went to the trash: put back together
	// and restored from here.
	Rejoined int64 `json:"restoredWrittenAfterTrash,omitempty"`
	Restored int64 `json:"sessionsRestored"`
	Erased   int64 `json:"sessionsErased"` // erased here for another machine
	// ErasedLines counts lines of sessions erased here that a machine
	// which kept the session wrote after the erase: not written here.
	ErasedLines    int64 `json:"linesOfErasedSessions,omitempty"`
	ForkedSessions int64 `json:"forkedSessions"`
	Collisions     int64 `json:"entryCollisions"`
	// Refused counts lines not written because they would break the
	// file for pi (an id held by another line, a parentId cycle).
	Refused int64 `json:"refusedLines"`
	// Untrusted counts lines of untrusted nodes on sessions they did not
	// begin: kept in the event log, not written here.
	Untrusted int64 `json:"untrustedLines"`
	// Migrated counts old sessions whose first migration (by pi on some
	// machine) was decided here.
	Migrated int64 `json:"sessionsMigrated"`
	// Failing counts the sessions whose writes here fail for a reason
	// that may pass (a full disk) and are retried; FailingError is the
	// last such error.
	Failing int64 `json:"sessionsRetryingWrites,omitempty"`
	// LetGo counts the sessions whose state was let go of to bound the
	// replicator's memory (evict.go), to be read again when a line comes.
	LetGo int64 `json:"sessionsLetGo,omitempty"`
	// WaitingForPartial counts the sessions whose lines wait because
	// their file here ends in a partial line; PartialExample names one.
	WaitingForPartial int64             `json:"sessionsWaitingForAPartialLine,omitempty"`
	PartialExample    string            `json:"partialLineSession,omitempty"`
	FailingError      string            `json:"lastWriteError,omitempty"`
	Quarantined       map[string]string `json:"quarantinedSessions,omitempty"`
	CollisionsList    []Collision       `json:"collisions,omitempty"`
}

// Stats returns the counters.
func (r *Replicator) Stats() Stats {
	r.mu.Lock()
	forks := int64(len(r.forkSIDs))
	var q map[string]string
	if len(r.quarantined) > 0 {
		q = make(map[string]string, len(r.quarantined))
		for k, v := range r.quarantined {
			q[k] = v
		}
	}
	cl := append([]Collision(nil), r.collisionList...)
	r.mu.Unlock()
	var failingErr string
	if e := r.failingErr.Load(); e != nil {
		failingErr = *e
	}
	var pw partialWait
	if p := r.partial.Load(); p != nil {
		pw = *p
	}
	return Stats{
		Failing: r.failing.Load(), FailingError: failingErr, WaitingForPartial: pw.n, PartialExample: pw.example, LetGo: r.letGo.Load(),
		FilesCreated: r.filesCreated.Load(), LinesWritten: r.linesWritten.Load(), Waiting: r.waiting.Load(), WaitingForHeader: r.headerlessN.Load(),
		Deferred: r.deferred.Load(), Rejected: r.rejected.Load(), Trashed: r.trashed.Load(), KeptWritten: r.kept.Load(), Rejoined: r.rejoined.Load(), Restored: r.restored.Load(),
		Erased: r.erasedRemote.Load(), ErasedLines: r.erasedLines.Load(),
		ForkedSessions: forks, Collisions: r.collisions.Load(), Refused: r.refused.Load(), Untrusted: r.untrusted.Load(), Migrated: r.migrated.Load(), Quarantined: q, CollisionsList: cl,
	}
}

// ForkedSessions lists the sessions that two machines continued from the
// same entry.
func (r *Replicator) ForkedSessions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.forkSIDs))
	for s := range r.forkSIDs {
		out = append(out, s)
	}
	return out
}

const positionKey = "replicator.position"

// Run replicates until ctx ends. Failures are retried and logged as the
// forwarder's are (eventlog.RunSessions); a run that lasted a minute
// counts as progress, so a failure after one is a new outage, waited out
// from the shortest pause.
func (r *Replicator) Run(ctx context.Context) error {
	// Before any file is staged: what a crash left behind.
	removed, err := sweepStaging(r.opts.Root, time.Now())
	for _, p := range removed {
		r.logger.Info("removed a staging file a crash left behind", "file", p)
	}
	if err != nil {
		r.logger.Warn("cannot remove staging files a crash left behind; they stay until the next start", "err", err)
	}
	var settled atomic.Int64 // runs that lasted a minute
	eventlog.RunSessions(ctx, r.link, &settled, func(ctx context.Context) error {
		start := time.Now()
		err := r.run(ctx)
		if time.Since(start) > time.Minute {
			settled.Add(1)
		}
		return err
	})
	return nil
}

func (r *Replicator) position(ctx context.Context) (uint64, error) {
	e, err := r.state.Get(ctx, positionKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("replicator position: %w", err)
	}
	return strconv.ParseUint(string(e.Value()), 10, 64)
}

// run replicates until a failure.
func (r *Replicator) run(ctx context.Context) error {
	pos, err := r.position(ctx)
	if err != nil {
		return err
	}
	// Events held in memory are re-read from the stream: start clean.
	r.sessions, r.files, r.nodes, r.letGoOf = map[string]*sess{}, map[string]*replica{}, map[string]string{}, map[string]letGo{}
	r.startPos, r.readPos = pos, pos
	r.waiting.Store(0)
	if err := r.loadHeaderless(ctx); err != nil {
		return err
	}
	if err := r.loadQuarantined(ctx); err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{}
	if pos > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = pos + 1
	}
	cons, err := r.all.JetStream().OrderedConsumer(ctx, eventlog.AllStream, cfg)
	if err != nil {
		return fmt.Errorf("replicator: consumer: %w", err)
	}
	p, err := eventlog.NewPump(cons, 1024, 8<<20)
	if err != nil {
		return fmt.Errorf("replicator: %w", err)
	}
	defer p.Stop()
	r.link.Up()
	asm := eventlog.NewAssemblers(false)
	saver := eventlog.NewPosition(r.state, positionKey, pos)
	defer func() {
		if err := saver.SaveOnStop(ctx); err != nil {
			r.logger.Debug("replicator: position not saved on stop; a restart re-checks from the one before", "err", err)
		}
	}()
	// Hints left from before this run may name messages that an erase
	// has removed since (the stream's consumer never delivers those):
	// start with none; from here on, a hint is taken only in order.
	eventlog.DrainHints(r.all.Stored())
	var msgs []jetstream.Msg
	for {
		// Wait for events; while some wait for a busy file, wake up
		// often enough to retry it, and while a position waits to be
		// written, no later than that.
		wait := 5 * time.Second
		if r.waiting.Load() > 0 {
			wait = r.opts.Idle / 4
		}
		if due, ok := saver.Due(time.Now()); ok {
			wait = min(wait, max(due, time.Millisecond))
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		var hinted bool
		msgs, hinted, err = p.NextOr(wctx, 1000, msgs[:0], r.all.Stored())
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("replicator: read: %w", err)
		}
		if err != nil {
			if cerr := p.Err(); cerr != nil {
				return fmt.Errorf("replicator: read: %w", cerr)
			}
		}
		for _, msg := range msgs {
			meta, err := msg.Metadata()
			if err != nil {
				return fmt.Errorf("replicator: read: %w", err)
			}
			seq := meta.Sequence.Stream
			take, stop := eventlog.InOrder(seq, r.readPos, hinted) // hints: eventlog.All.Stored
			if stop {
				break
			}
			if !take {
				continue
			}
			r.readPos = seq
			ev, err := asm.Add(eventlog.AllStream, msg.Subject(), seq, msg.Headers(), msg.Data())
			if err != nil {
				r.logger.Warn("replicator: skipping an unreadable event", "subject", msg.Subject(), "seq", seq, "err", err)
				continue
			}
			if ev != nil {
				if err := r.apply(ctx, ev); err != nil {
					return err
				}
			}
		}
		durable, err := r.flushHeld(ctx)
		if err != nil {
			return err
		}
		r.rejoinTrashed()
		if !durable {
			continue // not durable yet: the position stays
		}
		// Everything up to readPos is written, except what still waits (and
		// split lines not yet whole): the position stays before those.
		done := r.readPos
		for _, s := range r.sessions {
			if r.setAside(ctx, s) {
				continue // read again at a restart (headerless.go)
			}
			for _, ev := range s.queue {
				done = min(done, ev.Seq-1)
			}
			if s.trashAfter != nil {
				// A deletion that waits for the local pi is applied
				// again after a restart.
				done = min(done, s.trashAfter.Seq-1)
			}
		}
		if s := asm.PendingStart(); s > 0 {
			done = min(done, s-1)
		}
		if err := r.settleHeaderless(ctx); err != nil {
			return err
		}
		// Written at most once a second (eventlog.Position): replayed
		// lines are found in the files and not written again.
		if err := saver.Note(ctx, done); err != nil {
			return fmt.Errorf("replicator: %w", err)
		}
	}
}

// deletedKey is the state key remembering a session deleted elsewhere, so a
// replay of its older events never brings the file back.
func deletedKey(sid string) string { return SessionKey("replicator.deleted.", sid) }

// SessionKey is a state key of session sid under prefix: a hash of the id,
// which may hold characters a key may not, and is kept out of key names.
func SessionKey(prefix, sid string) string {
	h := sha256.Sum256([]byte(sid))
	return prefix + hex.EncodeToString(h[:16])
}
