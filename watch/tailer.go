package watch

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Tailer.
type Options struct {
	Root           string        // pi's sessions dir
	MaxLine        int           // longest line published
	Workers        int           // files handled in parallel
	RescanInterval time.Duration // full rescan period
	Logger         *slog.Logger
}

// Tailer follows every session file under Root and publishes its lines.
type Tailer struct {
	log     Log
	root    string
	maxLine int
	rescan  time.Duration
	logger  *slog.Logger
	workers []*worker
	seed    maphash.Seed

	mu       sync.Mutex
	sessions map[string]*sessionRef

	filesTracked, filesIgnored atomic.Int64
	published, malformed       atomic.Int64
	collisions, publishErrors  atomic.Int64
	deleted, rescans           atomic.Int64
	lastErr                    atomic.Pointer[string]
	publishSeconds             prometheus.Histogram
}

type sessionRef struct {
	s     *sessionLog
	files int
}

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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Tailer{
		log: log, root: filepath.Clean(o.Root), maxLine: o.MaxLine, rescan: o.RescanInterval,
		logger: o.Logger, seed: maphash.MakeSeed(), sessions: make(map[string]*sessionRef),
		publishSeconds: newPublishHistogram(),
	}
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
	d, err := newDiscovery(t)
	if err != nil {
		return err
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
	err = d.run(ctx)
	cancel()
	wg.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
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
	return filepath.ToSlash(rel), nil
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
	r.files++
	return r.s
}

// untrack detaches a file from its session; a session without files is
// forgotten (its state is reloaded from the stream if it comes back).
func (t *Tailer) untrack(f *file) {
	if f.status == statusIgnored {
		t.filesIgnored.Add(-1)
	}
	if f.sess == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.sessions[f.sid]; r != nil {
		if r.files--; r.files <= 0 {
			delete(t.sessions, f.sid)
		}
	}
}

func (t *Tailer) fileGone(f *file) {
	t.untrack(f)
	t.filesTracked.Add(-1)
	if f.status == statusSession {
		t.deleted.Add(1)
		t.logger.Info("session file deleted", "file", f.rel, "session", f.sid)
	}
}

// publish stores the lines the session does not hold yet.
func (t *Tailer) publish(ctx context.Context, s *sessionLog, lines []eventlog.Line) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		n, err := s.load(ctx, t.log)
		if err != nil {
			return err
		}
		t.collisions.Add(int64(n))
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
		if errors.Is(err, eventlog.ErrWrongLastSequence) {
			s.known = nil // someone else wrote: read the subject again
		}
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
	LastError      string `json:"lastError,omitempty"`
}

// Stats returns the current counters.
func (t *Tailer) Stats() Stats {
	t.mu.Lock()
	n := int64(len(t.sessions))
	t.mu.Unlock()
	s := Stats{
		FilesTracked: t.filesTracked.Load(), FilesIgnored: t.filesIgnored.Load(), Sessions: n,
		LinesPublished: t.published.Load(), Malformed: t.malformed.Load(), Collisions: t.collisions.Load(),
		PublishErrors: t.publishErrors.Load(), FilesDeleted: t.deleted.Load(), Rescans: t.rescans.Load(),
	}
	if e := t.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}
