package projection

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// Options configure a Worker.
type Options struct {
	// Node is this node's id: PI_ALL subjects of this node are skipped
	// (PI_LOCAL holds them already).
	Node string
	// Live has the bucket republish each value as it is stored, for the
	// local listener's readers (eventlog.LivePrefix); without, it does
	// not.
	Live bool
	// All consumes PI_ALL too (a workstation with a hub). The stream must
	// exist before Run.
	All bool
	// MaxTrees bounds the session trees held in memory (default 512); the
	// least recently used are dropped and rebuilt from the stream on need.
	MaxTrees int
	// MaxBodyBytes bounds the message bodies kept for repeated context
	// queries, over all sessions (default 64 MiB; see bodycache.go).
	MaxBodyBytes int64
	// Rules is the rule set every session's context and views follow
	// (PISYNC_RULES; the zero value is session.RulesAuto). A context query
	// may ask for another (ContextRules).
	Rules session.RuleSet
	// ReadAhead bounds the bodies a context query reads ahead of what it
	// writes (default 16 MiB; a single longer line is read alone).
	ReadAhead int64
	// LocalFiles, when set, names the files of a session this node's
	// tailer follows now, relative to SessionsDir with slashes: ls shows
	// them where the catalog still has the path of the last line applied
	// (a file moved or renamed, which publishes no line).
	LocalFiles func(sid string) []string
	// MapCwd, when set, is the cwd here of a session begun on another
	// machine (PISYNC_PATH_MAP, which the replicator applies to the
	// header it writes): the catalog's cwd is the one this machine's
	// file holds. Unset, it is the cwd the session's header says.
	MapCwd func(cwd string) string
	// SessionsDir is the sessions root the tailer reads (the root of
	// Pi-File). A context query reads this machine's own lines there, each
	// checked against its event's sha-256, before it asks the store
	// (filebodies.go); "" reads every body from the store.
	SessionsDir string
	// StartAfter, when not nil, holds back following the streams (and
	// re-projecting under a new rule set) until it is closed; the catalog
	// is loaded and queries are served meanwhile.
	StartAfter <-chan struct{}
	// WriteAfter, when not nil, holds back writing views each time the
	// followers catch up, and re-projecting under a new rule set, until it
	// is closed: events are applied as they come, and their views written
	// every flushEvery events and once it closes. The daemon passes the
	// tailer's Ready: during a first read of thousands of sessions the
	// followers catch up with the tailer again and again, and each time
	// would write the views of sessions whose lines are still coming; held
	// back, each view is written about once, and applying the events uses
	// the CPU the tailer leaves idle (it waits on its stores' fsyncs)
	// instead of following it (docs/PERFORMANCE.md).
	WriteAfter <-chan struct{}
	// WriteAfterBytes bounds what is applied while WriteAfter is open:
	// once a follower has taken this many bytes of events it waits for it
	// to close and applies the rest after (as it does at a large session:
	// overlapEnds). 0: no bound but that.
	WriteAfterBytes int64
	Logger          *slog.Logger
}

// Worker keeps the views of every session up to date.
type Worker struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	opts   Options
	logger *slog.Logger
	// viewSeed keys the hashes of written values (writtenHashes): they
	// never leave this process, and lines from other machines cannot be
	// chosen to make a changed page hash like the one it replaces.
	viewSeed maphash.Seed
	kv       jetstream.KeyValue
	ready    chan struct{}
	// contextSlots holds a token for each context query reading bodies
	// (eachContext): each reads ahead a share of Options.ReadAhead, so
	// that together they stay within it.
	contextSlots chan struct{}
	// replaySlots bounds the tails replaying a stream at once (tail.go).
	replaySlots chan struct{}
	// contextWaiting counts the queries waiting for a slot (those holding
	// one: len(contextSlots)).
	contextWaiting atomic.Int64
	// reprojected is closed when the views follow opts.Rules (rules.go).
	reprojected chan struct{}

	mu       sync.Mutex
	sessions map[string]*sessionState
	// names: the strings many sessions' entries share, kept once.
	names    names
	clock    uint64 // LRU clock
	trees    int    // loaded trees
	catalog  []CatalogEntry
	catDirty bool
	// catMu serializes Catalog's rebuilds of catalog (taken before mu).
	catMu sync.Mutex
	// bodyBytes is the size of every session's body cache.
	bodyBytes int64

	subs subscribers

	// erasedBelow: per erased session, the stream sequences up to which
	// its events are gone (erase.go). Guarded by mu.
	erasedBelow map[string]Src
	// The last sequence each follower handled (WaitHandled).
	handledLocal, handledAll eventlog.Handled

	applied, skipped, rebuilds, writes, flushes, erased atomic.Int64
	readAheadPeak                                       atomic.Int64
	bodiesFromFile, bodiesFromStore                     atomic.Int64
	// firstRead counts first messages read back from the streams after a
	// start (firstmessage.go).
	firstRead atomic.Int64
	// filled is closed once the first messages are read back after a
	// start (FirstMessagesFilled, FillingFirstMessages).
	filled chan struct{}
}

// Stats are the worker's counters since it started.
type Stats struct {
	Sessions int   `json:"sessions"`
	Trees    int   `json:"treesLoaded"`
	Applied  int64 `json:"eventsApplied"`
	Skipped  int64 `json:"eventsSkipped"` // already in the views (redelivered, replayed)
	Rebuilds int64 `json:"treeRebuilds"`  // trees rebuilt from the stream
	Writes   int64 `json:"kvWrites"`
	Flushes  int64 `json:"flushes"`
	Erased   int64 `json:"sessionsErased"` // dropped on an erase event
	// ReadAheadPeak is the most bytes of bodies one context query held
	// read ahead of what it wrote (Options.ReadAhead, or one longer line).
	ReadAheadPeak int64 `json:"contextReadAheadPeak"`
	// Bodies of context queries read from this machine's session files
	// (checked against their sha-256) and from the store.
	BodiesFromFile  int64 `json:"contextBodiesFromFile"`
	BodiesFromStore int64 `json:"contextBodiesFromStore"`
	// FirstMessagesRead is how many catalog entries loaded from the
	// bucket had their first message read back from the streams.
	FirstMessagesRead int64 `json:"firstMessagesRead"`
}

// New returns a worker over the connection nc; Run starts it.
func New(nc *nats.Conn, opts Options) (*Worker, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("projection: %w", err)
	}
	if opts.MaxTrees <= 0 {
		opts.MaxTrees = 512
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = defaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Worker{
		nc: nc, js: js, opts: opts, logger: opts.Logger, viewSeed: maphash.MakeSeed(),
		ready: make(chan struct{}), contextSlots: make(chan struct{}, contextQueries), replaySlots: make(chan struct{}, tailReplays), reprojected: make(chan struct{}), filled: make(chan struct{}), sessions: map[string]*sessionState{},
	}, nil
}

// Rules is the rule set the views follow (Options.Rules).
func (w *Worker) Rules() session.RuleSet { return w.opts.Rules }

// Ready is closed once the catalog is loaded and queries can be served.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// Stats returns the counters.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	n, t := len(w.sessions), w.trees
	w.mu.Unlock()
	return Stats{
		Sessions: n, Trees: t, Applied: w.applied.Load(), Skipped: w.skipped.Load(),
		Rebuilds: w.rebuilds.Load(), Writes: w.writes.Load(), Flushes: w.flushes.Load(),
		Erased: w.erased.Load(), ReadAheadPeak: w.readAheadPeak.Load(),
		BodiesFromFile: w.bodiesFromFile.Load(), BodiesFromStore: w.bodiesFromStore.Load(),
		FirstMessagesRead: w.firstRead.Load(),
	}
}

// Run opens the bucket, loads the catalog and follows the streams until
// ctx ends. A stream that fails is read again from its saved position
// after a pause; only a failure to open the bucket ends Run.
func (w *Worker) Run(ctx context.Context) error {
	kv, err := openBucket(ctx, w.js, w.opts.Live)
	if err != nil {
		return err
	}
	w.kv = kv
	loaded, err := w.loadCatalog(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// The bucket holds no first messages: they are read back from the
	// streams beside everything else (firstmessage.go). With nothing to
	// read, filled closes before ready, so no caller sees it filling.
	var fill sync.WaitGroup
	defer fill.Wait()
	if len(loaded) == 0 {
		close(w.filled)
	} else {
		fill.Add(1)
		go func() {
			defer fill.Done()
			w.fillFirstMessages(ctx, loaded)
		}()
	}
	close(w.ready)
	if w.opts.StartAfter != nil {
		select {
		case <-w.opts.StartAfter:
		case <-ctx.Done():
			close(w.reprojected)
			w.subs.closeAll()
			return nil
		}
	}
	streams := []string{eventlog.LocalStream}
	if w.opts.All {
		streams = append(streams, eventlog.AllStream)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(w.reprojected)
		if w.opts.WriteAfter != nil {
			select {
			case <-w.opts.WriteAfter:
			case <-ctx.Done():
				return
			}
		}
		if err := w.reproject(ctx, loaded); err != nil && ctx.Err() == nil {
			w.logger.Warn("projection: views left under their former rule set until the next start", "err", err)
		}
	}()
	for _, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.follow(ctx, s)
		}()
	}
	wg.Wait()
	w.subs.closeAll()
	return nil
}

// lookup returns the session's state, creating it when create is set.
func (w *Worker) lookup(sid string, create bool) *sessionState {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.sessions[sid]
	if s == nil && create {
		sid = strings.Clone(sid) // a substring of a message's subject
		s = newSessionState(sid)
		w.sessions[sid] = s
	}
	return s
}

// ensureTree loads the session's tree if it is not in memory: the events
// the views were built from, read back from the streams up to the
// sequences the catalog entry names. The caller holds s.mu.
func (w *Worker) ensureTree(ctx context.Context, s *sessionState) error {
	w.mu.Lock()
	w.clock++
	s.lastUse = w.clock
	w.mu.Unlock()
	if s.tree != nil {
		return nil
	}
	t, err := w.rebuild(ctx, s.sid, s.cat.Src.Src())
	if err != nil {
		return err
	}
	s.tree, s.err, s.kept = t.tree, t.err, t.kept
	s.cat.MigratedBy, s.cat.MigrationLosers = t.migratedBy, t.losers
	w.mu.Lock()
	w.trees++
	w.mu.Unlock()
	return nil
}

// evict drops the least recently used trees beyond MaxTrees. Their views
// stay in KV; the trees come back from the stream when needed.
func (w *Worker) evict() {
	w.mu.Lock()
	if w.trees <= w.opts.MaxTrees {
		w.mu.Unlock()
		return
	}
	loaded := w.loadedLocked()
	w.mu.Unlock()
	slices.SortFunc(loaded, func(a, b treeUse) int { return cmp.Compare(a.last, b.last) })
	target := w.opts.MaxTrees * 9 / 10
	for _, u := range loaded {
		s := u.s
		w.mu.Lock()
		done := w.trees <= target
		w.mu.Unlock()
		if done {
			return
		}
		if !s.mu.TryLock() {
			continue // in use: keep it
		}
		w.dropTree(s)
		s.mu.Unlock()
	}
}

// treeUse is a session whose tree was loaded, and when it was last used
// (the LRU clock).
type treeUse struct {
	s    *sessionState
	last uint64
}

// loadedLocked lists the sessions whose tree is loaded. Called with w.mu
// held; a tree may go before the caller takes the session's lock.
func (w *Worker) loadedLocked() []treeUse {
	var loaded []treeUse
	for _, s := range w.sessions {
		if s.lastUse > 0 {
			loaded = append(loaded, treeUse{s, s.lastUse})
		}
	}
	return loaded
}

// dropTree drops the session's tree, if it is loaded, and what is kept
// with it (its lines' places, what its pages were hashed from); the views
// stay in KV and the tree comes back from the stream when needed. Called
// with s.mu held.
func (w *Worker) dropTree(s *sessionState) {
	if s.tree == nil {
		return
	}
	s.tree, s.kept = nil, nil
	w.mu.Lock()
	w.trees--
	s.lastUse = 0
	w.mu.Unlock()
}

// smallTree is the most entries a loaded tree may hold for
// DropSmallTrees to let it go. Rebuilding one from the stream reads that
// many messages, about a millisecond; the tree of a long session costs
// more to rebuild than to keep, and stays under MaxTrees as before.
const smallTree = 64

// DropSmallTrees drops the loaded trees of at most smallTree entries that
// nothing is using, and reports how many it dropped. The daemon calls it
// when it gives memory back after a burst: a first read of 10,000 small
// sessions left the last 460-512 of their trees in memory, though none
// may take a line again for days, and a session that does has its tree
// rebuilt at its next event (as after an eviction).
func (w *Worker) DropSmallTrees() (dropped int) {
	w.mu.Lock()
	loaded := w.loadedLocked()
	w.mu.Unlock()
	for _, u := range loaded {
		s := u.s
		if !s.mu.TryLock() {
			continue // in use: keep it
		}
		if s.tree != nil && s.tree.Len() <= smallTree {
			w.dropTree(s)
			dropped++
		}
		s.mu.Unlock()
	}
	return dropped
}

var errNotReady = errors.New("projection: not ready")
