package watch

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Tailer.
type Options struct {
	Root           string        // pi's sessions dir
	MaxLine        int           // longest line published
	Workers        int           // files handled in parallel
	RescanInterval time.Duration // rescan period (every statEvery-th rescan is full: discover.go)
	// MemoryBudget bounds the bytes of lines held at once across workers
	// (0: DefaultMemoryBudget); a line larger than it is handled alone.
	MemoryBudget int64
	Logger       *slog.Logger
	// Known adds the hashes of a session's lines that are in the event log
	// under other nodes (the replicator writes them into files here); such
	// lines are not this node's to publish.
	Known func(ctx context.Context, sid string, add func([32]byte)) error
	// Deleted reports whether a session was deleted on another machine
	// (the replicator's record), so that its file showing up here again
	// is published as a restore.
	Deleted func(ctx context.Context, sid string) (bool, error)
	// RootFile keeps the sessions dir the store's sessions were last read
	// from ("": not kept). Started on another, the tailer publishes no
	// deletion for the sessions it does not find (stopped.go).
	RootFile string
}

// Tailer follows every session file under Root and publishes its lines.
type Tailer struct {
	log     Log
	root    string
	maxLine int
	rescan  time.Duration
	// progressEvery: how often a long first read reports its progress.
	progressEvery time.Duration
	// slowAfter: how long a file is read before it is named (slow.go).
	slowAfter time.Duration
	logger    *slog.Logger
	workers   []*worker
	seed      maphash.Seed
	mem       *budget

	known            func(ctx context.Context, sid string, add func([32]byte)) error
	deletedElsewhere func(ctx context.Context, sid string) (bool, error)
	rootFile         string // Options.RootFile
	lastRootDir      string // what it held at the start of Run
	ready            chan struct{}
	heldAtStart      heldAtStart

	// settled: the stat of each file its worker has fully handled, so
	// that a rescan passes over files that did not change (settled.go).
	settledMu sync.Mutex
	settled   map[string]fileSig
	// aliases are the second paths of followed files (hard links), from
	// discovery, for fileGone on the workers.
	aliases aliasSet
	// hintless makes discovery drop fsnotify's events (tests: the rescan
	// alone must find every change).
	hintless bool
	// newWatcher makes discovery's watcher (nil: fsnotify.NewWatcher;
	// tests: one that fails, as at the inotify instance limit).
	newWatcher func() (*fsnotify.Watcher, error)

	mu       sync.Mutex
	sessions map[string]*sessionRef
	moved    map[string]struct{} // files the replicator moved away

	filesTracked, filesIgnored atomic.Int64
	published, malformed       atomic.Int64
	collisions, publishErrors  atomic.Int64
	deleted, rescans           atomic.Int64
	bytesRead                  atomic.Int64
	duplicatePaths             atomic.Int64 // discovery: paths of a file followed under another path
	unreadableDirs             atomic.Int64 // discovery: folders the last walk could not read
	unwatchedDirs              atomic.Int64 // discovery: folders the last walk could not watch
	ignoredBy                  [numIgnoreReasons]atomic.Int64
	lastErr                    atomic.Pointer[string]
	failLog                    failLog // failing files the log names (retry.go)
	publishSeconds             prometheus.Histogram

	// away is set while the sessions dir is gone or has none of its
	// session files left (discovery.away): a file not found then is no
	// deletion.
	away atomic.Bool
	// rescanErr is why the last walk failed, nil while walks work.
	rescanErr atomic.Pointer[string]
	// dels: deletions wait for a walk to confirm them (deletions.go).
	dels deletions
}

type sessionRef struct {
	s *sessionLog
	// files holds the session's paths: almost always one (a slice, not a
	// map: 10,000 sessions held 10,000 maps of one entry each).
	files []string
}

// DefaultMemoryBudget is Options.MemoryBudget when not set.
const DefaultMemoryBudget = 128 << 20

// New returns a tailer publishing into log.
func New(log Log, o Options) *Tailer {
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.MaxLine <= 0 {
		o.MaxLine = 64 << 20
	}
	if o.RescanInterval <= 0 {
		o.RescanInterval = 10 * time.Second
	}
	if o.MemoryBudget <= 0 {
		o.MemoryBudget = DefaultMemoryBudget
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Tailer{
		log: log, root: filepath.Clean(o.Root), maxLine: o.MaxLine, rescan: o.RescanInterval, progressEvery: 5 * time.Second, slowAfter: slowAfter,
		logger: o.Logger, seed: maphash.MakeSeed(), sessions: make(map[string]*sessionRef), settled: make(map[string]fileSig),
		publishSeconds: newPublishHistogram(), mem: newBudget(o.MemoryBudget),
		known: o.Known, deletedElsewhere: o.Deleted, ready: make(chan struct{}), moved: make(map[string]struct{}),
		rootFile: o.RootFile,
	}
	t.dels.settle, t.dels.awaiting, t.dels.soon = deleteSettle, make(map[string]uint64), make(chan struct{}, 1)
	for i := 0; i < o.Workers; i++ {
		t.workers = append(t.workers, &worker{t: t, files: make(map[string]*file), wake: make(chan struct{}, 1), dirty: make(map[string]struct{})})
	}
	return t
}

// Run follows the tree until ctx ends. Cancellation is not an error.
func (t *Tailer) Run(ctx context.Context) error {
	if err := os.MkdirAll(t.root, 0o700); err != nil {
		return fmt.Errorf("watch: sessions dir: %w", err)
	}
	if st, err := os.Stat(t.root); err == nil {
		if why := othersMayWrite(st); why != "" {
			t.logger.Warn("the sessions dir is "+why+": another user could put files there; only this user's files and links are followed", "dir", t.root, "hint", "chmod 700 "+t.root)
		}
	}
	t.lastRootDir = t.lastRoot()
	d := newDiscovery(t)
	if err := t.heldAtStart.read(ctx, t.log); err != nil && ctx.Err() == nil {
		// Each session's subject is read on its own instead. (A daemon
		// stopped during the read is no news.)
		t.logger.Warn("watch: sessions held in the store not read at start", "err", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range t.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t.awaitReady(ctx, d)
	}()
	err := d.run(ctx)
	cancel()
	wg.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// awaitReady closes t.ready once the first walk is done, every worker
// has handled what it found, and the sessions whose files went while no
// tailer ran are published deleted. Reading thousands of existing sessions on a
// first start takes a while: it says how far it got every progressEvery.
func (t *Tailer) awaitReady(ctx context.Context, d *discovery) {
	select {
	case <-d.walked:
	case <-ctx.Done():
		return
	}
	start := time.Now()
	barriers := make([]chan struct{}, len(t.workers))
	for i, w := range t.workers {
		barriers[i] = make(chan struct{})
		w.barrier(barriers[i])
	}
	tick := time.NewTicker(t.progressEvery)
	defer tick.Stop()
	for _, b := range barriers {
		for waiting := true; waiting; {
			select {
			case <-b:
				waiting = false
			case <-tick.C:
				attrs := []any{"files", d.found, "opened", t.filesTracked.Load(), "lines_published", t.published.Load(),
					"elapsed", time.Since(start).Round(time.Second)}
				if slow := t.slowFiles(); len(slow) > 0 {
					// The first read waits for it: say which it is.
					attrs = append(attrs, "reading_for_long", slow[0].File, "for", time.Duration(slow[0].Seconds)*time.Second)
				}
				t.logger.Info("reading the session files found at start", attrs...)
			case <-ctx.Done():
				return
			}
		}
	}
	if r := t.Retrying(); r > 0 {
		// Not a success to report as one: a store that takes no writes
		// (a full disk) left these files to be published later.
		t.logger.Warn("session files found at start are read, but some are not published yet; they are retried until they are", "files", d.found,
			"not_published", r, "lines_published", t.published.Load(), "took", time.Since(start).Round(time.Millisecond))
	} else {
		t.logger.Info("session files found at start are read", "files", d.found,
			"lines_published", t.published.Load(), "took", time.Since(start).Round(time.Millisecond))
	}
	t.dropKnown(time.Now())
	t.deletedWhileStopped(ctx, t.heldAtStart.take(), d.found, t.lastRootDir)
	t.keepRoot()
	close(t.ready)
}

// knownIdle is how long a session's hashes and entry ids stay loaded
// after they were last needed. Holding every line's hash of every session
// made the daemon's memory grow with the number of sessions (about 0.7 KB
// a small session: 6.9 MB live after 10,000 were written while it ran),
// and most sessions are never written again. A session loads them again
// from its subject the next time one of its files has a line to publish,
// as after a restart; ten minutes keeps them across a person's pauses in
// a live session, where that read would add to a line's time.
const knownIdle = 10 * time.Minute

// dropKnown lets go of the hashes and entry ids of the sessions that last
// needed them before the given time: at the end of the first read, every
// session it read (before is then); after that, once a minute, those not
// written for knownIdle.
func (t *Tailer) dropKnown(before time.Time) {
	for _, s := range t.sessionLogs() {
		if !s.mu.TryLock() {
			// In use, so not idle: and a load that waits (on the store,
			// on a slow file) held up the walks behind it, which run
			// this, and with them every new file.
			continue
		}
		if s.used.Before(before) {
			s.known, s.ids = nil, nil
		}
		s.mu.Unlock()
	}
}

// sessionLogs returns every session's log, taken under t.mu so that each
// can then be locked on its own without holding the tailer's lock.
func (t *Tailer) sessionLogs() []*sessionLog {
	t.mu.Lock()
	defer t.mu.Unlock()
	logs := make([]*sessionLog, 0, len(t.sessions))
	for _, r := range t.sessions {
		logs = append(logs, r.s)
	}
	return logs
}

// submit marks path as changed; its worker looks at it soon.
func (t *Tailer) submit(path string) {
	w := t.workers[maphash.String(t.seed, path)%uint64(len(t.workers))]
	w.mark(path)
}

func (t *Tailer) rel(path string) (string, error) {
	rel, err := filepath.Rel(t.root, path)
	if err != nil {
		return "", fmt.Errorf("watch: %s is outside %s: %w", path, t.root, err)
	}
	rel = filepath.ToSlash(rel)
	// The end of path where it is that: a tracked file keeps both, and a
	// second copy of 10,000 files' names was about 1 MB of an idle heap.
	if n := len(path) - len(rel); n > 0 && path[n-1] == '/' && path[n:] == rel {
		return path[n:], nil
	}
	return rel, nil
}

// track attaches a file to its session, creating the session's state on
// first sight.
func (t *Tailer) track(f *file) *sessionLog {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.sessions[f.sid]
	if r == nil {
		r = &sessionRef{s: &sessionLog{sid: f.sid}}
		t.sessions[f.sid] = r
	}
	if !slices.Contains(r.files, f.path) {
		r.files = append(r.files, f.path)
	}
	return r.s
}

// untrack detaches a file from its session; a session without files is
// forgotten (its state is reloaded from the stream if it comes back). It
// reports whether that was the session's last file.
func (t *Tailer) untrack(f *file) (last bool) {
	if f.status == statusIgnored {
		t.filesIgnored.Add(-1)
		t.ignoredBy[f.ignored].Add(-1)
	}
	if f.sess == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.sessions[f.sid]; r != nil {
		if i := slices.Index(r.files, f.path); i >= 0 {
			r.files = slices.Delete(r.files, i, i+1)
		}
		if len(r.files) == 0 {
			delete(t.sessions, f.sid)
			return true
		}
	}
	return false
}

// fileGone handles a followed file that disappeared. When the session has
// no file left here, the deletion is published as a tombstone, unless the
// replicator moved the file itself, once a walk confirms it (deletions.go);
// until then it reports wait, and the worker keeps f. It can be called
// again after a failed publish, and when the walk hands the file back.
func (t *Tailer) fileGone(ctx context.Context, f *file) (wait bool, err error) {
	// The replicator's or an erase's mark: the file was moved away, or
	// removed, on purpose; noticed now, or while its deletion waited.
	t.mu.Lock()
	_, moved := t.moved[f.path]
	delete(t.moved, f.path)
	t.mu.Unlock()
	if !f.gone {
		f.gone = true
		last := t.untrack(f)
		t.filesTracked.Add(-1)
		if f.status != statusSession || moved {
			return false, nil
		}
		if !last {
			// Moved, or one of two copies removed: the session is here.
			t.logger.Debug("session file gone; its session has another file here", "file", f.rel, "session", f.sid)
			return false, nil
		}
		if t.livesOn(f) {
			return false, nil
		}
		f.tombstone = true
	}
	if !f.tombstone {
		return false, nil
	}
	if moved {
		// Erased (Remove), or trashed for another machine's deletion,
		// while its deletion waited: nothing of it is to be published.
		f.tombstone = false
		t.deletionDone(f.path)
		return false, nil
	}
	if !t.awaitDeletion(f.path) {
		return true, nil
	}
	// Confirmed: the walk found the sessions dir there. The session may
	// have a file again by now (moved into a folder made after the
	// first look), and then it is not deleted.
	t.mu.Lock()
	_, tracked := t.sessions[f.sid]
	t.mu.Unlock()
	if tracked || t.livesOn(f) {
		f.tombstone = false
		t.deletionDone(f.path)
		return false, nil
	}
	if err := t.tombstone(ctx, f.sess, f.rel); err != nil {
		return false, err
	}
	f.tombstone = false
	t.deletionDone(f.path)
	t.deleted.Add(1)
	t.logger.Info("session file deleted", "file", f.rel, "session", f.sid)
	return false, nil
}

// livesOn reports whether the file f was lives on under another name, and
// hands that name to its worker.
func (t *Tailer) livesOn(f *file) bool {
	if alias := t.aliases.of(f.dev, f.ino); alias != "" {
		// The file lives on under another name (a hard link the walk
		// passed over as a second path of a followed file): no
		// deletion, and it is followed under that name from now on.
		// Before, a tombstone went out, then a restore a walk later.
		t.logger.Info("session file removed under one name; followed under another", "file", f.rel, "session", f.sid, "now", alias)
		t.submit(alias)
		return true
	}
	if to := t.movedTo(f); to != "" {
		t.logger.Info("session file moved; followed under its new name", "file", f.rel, "session", f.sid, "now", to)
		t.submit(to)
		return true
	}
	return false
}

// tombstone publishes that session s has no file here any more; file is
// the one that went last.
func (t *Tailer) tombstone(ctx context.Context, s *sessionLog, file string) error {
	return t.publish(ctx, s, []eventlog.Line{controlLine(eventlog.OpDelete, "tombstone", file)})
}

// revive publishes a restore when a file of a deleted session shows up: the
// session's last event here is this node's tombstone, or another machine
// deleted it. last is the session's last stored event (nil: none).
func (t *Tailer) revive(ctx context.Context, f *file, last *eventlog.Event) error {
	deleted := last != nil && last.Op == eventlog.OpDelete
	if !deleted && t.deletedElsewhere != nil {
		var err error
		if deleted, err = t.deletedElsewhere(ctx, f.sid); err != nil {
			return fmt.Errorf("watch: deletion record of %s: %w", f.sid, err)
		}
	}
	if !deleted {
		return nil
	}
	t.logger.Info("deleted session is back", "file", f.rel, "session", f.sid)
	return t.publish(ctx, f.sess, []eventlog.Line{controlLine(eventlog.OpRestore, "restore", f.rel)})
}

// controlLine is a control event about a file: its payload names the
// operation, the file and the time, so no two are alike (a second deletion
// is not deduplicated against the first).
func controlLine(op, typ, rel string) eventlog.Line {
	raw, _ := json.Marshal(map[string]any{"op": op, "file": rel, "time": time.Now().UTC().Format(time.RFC3339Nano)})
	return eventlog.Line{Raw: raw, Sha: sha256.Sum256(raw), Type: typ, File: publishedFile(rel), Op: op}
}

// FilesFor lists the files that hold a session (the replicator writes
// remote lines into them).
func (t *Tailer) FilesFor(sid string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.sessions[sid]
	if r == nil {
		return nil
	}
	out := slices.Clone(r.files)
	sort.Strings(out)
	return out
}

// RelFilesFor lists the files that hold a session relative to the
// sessions dir, with slashes, as events name them (ls shows where a file
// moved: projection.Options.LocalFiles).
func (t *Tailer) RelFilesFor(sid string) []string {
	abs := t.FilesFor(sid)
	for i, p := range abs {
		abs[i] = t.relOrPath(p)
	}
	return abs
}

// Learn records a line of the session as already in the event log: the
// replicator calls it before writing a remote line into a file here.
func (t *Tailer) Learn(sid string, sha [32]byte) {
	t.mu.Lock()
	r := t.sessions[sid]
	t.mu.Unlock()
	if r == nil {
		return // not loaded: a later load reads it from the log
	}
	r.s.mu.Lock()
	if r.s.known != nil {
		r.s.known[sha] = struct{}{}
	}
	r.s.mu.Unlock()
}

// Forget marks a file the replicator is about to move away: its
// disappearance is not a deletion to publish. The returned undo takes the
// mark back when the move failed, so that a later deletion by the user is
// published.
func (t *Tailer) Forget(path string) (undo func()) {
	t.mu.Lock()
	t.moved[path] = struct{}{}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.moved, path)
		t.mu.Unlock()
	}
}

// Ready is closed once every file present at start has been read once.
func (t *Tailer) Ready() <-chan struct{} { return t.ready }

// loadLocked reads what the session holds, once, and records that it was
// needed now (dropKnown). Called with s.mu held.
func (t *Tailer) loadLocked(ctx context.Context, s *sessionLog) error {
	s.used = time.Now()
	if s.known != nil {
		return nil
	}
	n, err := s.load(ctx, t.log, t.known, t.heldAtStart.empty(s.sid, true))
	if err != nil {
		return err
	}
	t.collisions.Add(int64(n))
	return nil
}

// holds reports whether the session holds a line with this hash already.
func (t *Tailer) holds(ctx context.Context, s *sessionLog, sha [32]byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := t.loadLocked(ctx, s); err != nil {
		return false, err
	}
	_, ok := s.known[sha]
	return ok, nil
}

// publish stores the lines the session does not hold yet.
func (t *Tailer) publish(ctx context.Context, s *sessionLog, lines []eventlog.Line) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := t.loadLocked(ctx, s); err != nil {
		return err
	}
	fresh := lines[:0:0]
	seen := make(map[[32]byte]struct{}, len(lines))
	for i := range lines {
		if _, ok := s.known[lines[i].Sha]; ok {
			continue
		}
		if _, ok := seen[lines[i].Sha]; ok {
			continue
		}
		seen[lines[i].Sha] = struct{}{}
		fresh = append(fresh, lines[i])
	}
	if len(fresh) == 0 {
		return nil
	}
	start := time.Now()
	last, n, err := t.log.Publish(ctx, s.sid, s.last, fresh)
	t.publishSeconds.Observe(time.Since(start).Seconds())
	for i := 0; i < n; i++ {
		if s.add(&fresh[i]) {
			t.collisions.Add(1)
			t.logger.Warn("entry id held by two different lines (collision or rewrite); both kept",
				"session", s.sid, "entry", fresh[i].ID, "file", fresh[i].File)
		}
	}
	t.published.Add(int64(n))
	if n > 0 {
		s.last = last
	}
	if err != nil {
		t.publishErrors.Add(1)
		// Read the subject again before the next attempt, whatever the
		// error: someone else wrote (wrong last sequence), or the outcome
		// is unknown (a timeout, a publish given up when the store broke,
		// which the server may have stored: sent again at the same
		// position, it would be refused as a wrong last sequence). The
		// subject is the truth; a belief kept across a failure can only
		// go wrong. The re-read is paced by the file's back-off.
		s.known = nil
		return err
	}
	return nil
}

// Stats is a snapshot of the tailer's counters.
type Stats struct {
	FilesTracked   int64  `json:"filesTracked"`
	FilesIgnored   int64  `json:"filesIgnored"`
	Sessions       int64  `json:"sessions"`
	LinesPublished int64  `json:"linesPublished"`
	Malformed      int64  `json:"malformedLines"`
	Collisions     int64  `json:"entryCollisions"`
	PublishErrors  int64  `json:"publishErrors"`
	FilesDeleted   int64  `json:"filesDeleted"`
	Rescans        int64  `json:"rescans"`
	LastError      string `json:"lastError,omitempty"` // the latest failure, while a file is retried

	// FilesIgnoredBy splits FilesIgnored by reason (see ignoreReason).
	FilesIgnoredBy map[string]int64 `json:"filesIgnoredBy,omitempty"`
	// DuplicatePaths counts paths passed over because their file is
	// followed under another path (a hard link, two links to one folder);
	// UnreadableFolders the folders the last walk could not read.
	DuplicatePaths    int64 `json:"duplicatePaths"`
	UnreadableFolders int64 `json:"unreadableFolders"`
	// UnwatchedFolders the folders the last walk could not watch (an
	// inotify limit): their files are found by the rescans only.
	UnwatchedFolders int64 `json:"unwatchedFolders,omitempty"`
	// SessionsDirAway is true while the sessions dir is gone, or holds
	// none of the two or more session files it held: no file is taken
	// for deleted.
	SessionsDirAway bool `json:"sessionsDirAway,omitempty"`
	// RescanError is why the walks of the sessions dir fail, while they
	// do (the folder made unreadable: no file is found or seen gone).
	RescanError string `json:"rescanError,omitempty"`
	// DeletionsWaiting counts the session files seen gone whose deletion
	// waits for a walk to confirm it (deletions.go).
	DeletionsWaiting int64 `json:"deletionsWaiting,omitempty"`
	// BytesRead counts the bytes read from session files.
	BytesRead int64 `json:"bytesRead"`
	// MemoryHeld is the bytes of lines held now, MemoryPeak the most held
	// at once, MemoryBudget the bound on both (Options.MemoryBudget;
	// in pisyncd a quarter of PISYNC_MEMORY_BUDGET less its reserve);
	// MemoryWaits counts the times a worker waited for room.
	MemoryHeld   int64 `json:"memoryHeld"`
	MemoryPeak   int64 `json:"memoryPeak"`
	MemoryBudget int64 `json:"memoryBudget"`
	MemoryWaits  int64 `json:"memoryWaits"`
	// SlowFiles are the files a worker has been reading for more than
	// ten seconds (a huge file, a hung network mount): the other files of
	// that worker wait meanwhile (slow.go).
	SlowFiles []SlowFile `json:"slowFiles,omitempty"`
}

// SessionsDirAway reports Stats's SessionsDirAway alone, for a health
// probe, without counting everything else.
func (t *Tailer) SessionsDirAway() bool { return t.away.Load() }

// Stats returns the current counters.
func (t *Tailer) Stats() Stats {
	t.mu.Lock()
	n, waiting := int64(len(t.sessions)), int64(len(t.dels.awaiting))
	t.mu.Unlock()
	s := Stats{
		DeletionsWaiting: waiting,
		FilesTracked:     t.filesTracked.Load(), FilesIgnored: t.filesIgnored.Load(), Sessions: n,
		LinesPublished: t.published.Load(), Malformed: t.malformed.Load(), Collisions: t.collisions.Load(),
		PublishErrors: t.publishErrors.Load(), FilesDeleted: t.deleted.Load(), Rescans: t.rescans.Load(),
		SessionsDirAway: t.away.Load(),
	}
	if e := t.rescanErr.Load(); e != nil {
		s.RescanError = *e
	}
	if e := t.lastErr.Load(); e != nil && t.Retrying() > 0 {
		// Only while a file still fails: once every file is published
		// again, an old error in status read as a problem under way.
		s.LastError = *e
	}
	for r := range t.ignoredBy {
		if n := t.ignoredBy[r].Load(); n != 0 {
			if s.FilesIgnoredBy == nil {
				s.FilesIgnoredBy = map[string]int64{}
			}
			s.FilesIgnoredBy[ignoreReason(r).String()] = n
		}
	}
	s.BytesRead = t.bytesRead.Load()
	s.DuplicatePaths, s.UnreadableFolders, s.UnwatchedFolders = t.duplicatePaths.Load(), t.unreadableDirs.Load(), t.unwatchedDirs.Load()
	s.MemoryHeld, s.MemoryPeak, s.MemoryWaits = t.mem.state()
	s.MemoryBudget = t.mem.size
	s.SlowFiles = t.slowFiles()
	return s
}
