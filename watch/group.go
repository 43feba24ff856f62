package watch

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Group commit. With SyncAlways every publish costs the store one fsync,
// and a small session (a header and a few entries) read on a first start
// was one fsync per line: the first read of 10,000 such files was bound by
// the disk at a tenth of what the store can take in atomic batches. While
// a worker handles several changed files in one round (a first read, a
// rescan that found many), it keeps the last lines of each file back and
// publishes those of many sessions in ONE atomic batch
// (eventlog.Local.PublishGroups): one commit, one fsync. Each session's
// first message still states the subject sequence it follows, so exactly
// once holds as with a publish per session; the batch is all or nothing.
// A file's read position moves only once its lines are durable, as before.

const (
	// groupMaxBytes bounds the bytes of lines a group holds (they stay
	// within the tailer's memory budget as well); groupMaxFile is the
	// most a single file may add: larger reads publish at once.
	groupMaxBytes = 4 << 20
	groupMaxFile  = 1 << 20
)

// group is the lines a worker keeps back in one round.
type group struct {
	entries []groupEntry
	msgs    int
	bytes   int
	sess    map[*sessionLog]struct{}
}

// groupEntry is one file's read, handled but not yet committed.
type groupEntry struct {
	f    *file
	p    pending
	part partial // the line at p.off read so far (given to f on commit)
}

// keep takes f's read p (its lines still to publish) into the worker's
// group, and reports whether it did. It does not while the worker is not
// grouping, and not for a read too large to wait: the caller then flushes
// it at once.
func (w *worker) keep(ctx context.Context, f *file, p *pending, part partial) bool {
	g := w.grp
	if g == nil || f.sess == nil || len(p.lines) == 0 || p.bytes > groupMaxFile {
		return false
	}
	if _, failing := w.retry[f.path]; failing {
		// A failing file is published on its own: its handle must see
		// the outcome, so that its back-off holds (and its recovery is
		// logged once, when it happens).
		return false
	}
	msgs := 0
	for i := range p.lines {
		msgs += p.lines[i].Chunks()
	}
	if msgs > eventlog.MaxBatch/2 {
		return false
	}
	_, again := g.sess[f.sess]
	if again || g.msgs+msgs > eventlog.MaxBatch || g.bytes+p.bytes > groupMaxBytes {
		// One session appears once in a batch (the server checks its
		// expected sequence once, before the batch's writes).
		w.flushGroup(ctx)
		g = w.grp
	}
	if g.sess == nil {
		g.sess = make(map[*sessionLog]struct{})
	}
	g.entries = append(g.entries, groupEntry{f: f, p: *p, part: part})
	g.sess[f.sess] = struct{}{}
	g.msgs += msgs
	g.bytes += p.bytes
	// The group holds the lines and their share of the budget now.
	*p = pending{off: p.off}
	return true
}

// flushGroup publishes the group and commits each file's read. If the
// batch fails, each file is published on its own, so that one session's
// trouble (someone else wrote its subject) holds up only its own file,
// which is then retried with back-off like any failed file.
func (w *worker) flushGroup(ctx context.Context) {
	g := w.grp
	if g == nil || len(g.entries) == 0 {
		return
	}
	entries := g.entries
	w.grp = &group{entries: entries[:0:0]}
	if err := w.t.publishGroup(ctx, entries); err == nil {
		for i := range entries {
			e := &entries[i]
			e.p.lines = nil
			w.commit(e.f, &e.p, e.part)
		}
		return
	}
	for i := range entries {
		e := &entries[i]
		if err := w.flush(ctx, e.f, &e.p); err != nil {
			w.t.mem.release(e.p.held)
			w.failed(ctx, e.f.path, err)
			continue
		}
		if e.part.start == e.f.offset {
			e.f.part = e.part
		}
	}
}

// dropGroup gives back what an abandoned group held (the worker stops).
func (w *worker) dropGroup() {
	if w.grp == nil {
		return
	}
	for i := range w.grp.entries {
		w.t.mem.release(w.grp.entries[i].p.held)
	}
	w.grp = nil
}

// commit moves f past a read whose lines are durable.
func (w *worker) commit(f *file, p *pending, part partial) {
	if err := w.flush(context.Background(), f, p); err != nil {
		// Unreachable: flush publishes nothing when p holds no lines.
		panic(fmt.Sprintf("watch: commit: %v", err))
	}
	if part.start == f.offset {
		f.part = part
	}
}

// publishGroup publishes the lines of the entries (distinct sessions) that
// their sessions do not hold yet, in one atomic batch.
func (t *Tailer) publishGroup(ctx context.Context, entries []groupEntry) error {
	sess := make([]*groupEntry, len(entries))
	for i := range entries {
		sess[i] = &entries[i]
	}
	// Locked in one order (by session id), so that two workers' groups
	// never wait for each other; every other path holds one session.
	sort.Slice(sess, func(i, j int) bool { return sess[i].f.sess.sid < sess[j].f.sess.sid })
	for _, e := range sess {
		e.f.sess.mu.Lock()
		defer e.f.sess.mu.Unlock()
	}
	groups := make([]eventlog.Group, 0, len(sess))
	owners := make([]*sessionLog, 0, len(sess))
	for _, e := range sess {
		s := e.f.sess
		if err := t.loadLocked(ctx, s); err != nil {
			return err
		}
		fresh := e.p.lines[:0:0]
		seen := make(map[[32]byte]struct{}, len(e.p.lines))
		for i := range e.p.lines {
			sha := e.p.lines[i].Sha
			if _, ok := s.known[sha]; ok {
				continue
			}
			if _, ok := seen[sha]; ok {
				continue
			}
			seen[sha] = struct{}{}
			fresh = append(fresh, e.p.lines[i])
		}
		if len(fresh) > 0 {
			groups = append(groups, eventlog.Group{SID: s.sid, Last: s.last, Lines: fresh})
			owners = append(owners, s)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	start := time.Now()
	seqs, err := t.log.PublishGroups(ctx, groups)
	t.publishSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		// The outcome may be unknown (a lost reply): each session reads
		// its subject again before its next publish.
		for _, s := range owners {
			s.known = nil
		}
		return err
	}
	for i, s := range owners {
		for j := range groups[i].Lines {
			if s.add(&groups[i].Lines[j]) {
				t.collisions.Add(1)
				t.logger.Warn("entry id held by two different lines (collision or rewrite); both kept",
					"session", s.sid, "entry", groups[i].Lines[j].ID, "file", groups[i].Lines[j].File)
			}
		}
		s.last = seqs[i]
		t.published.Add(int64(len(groups[i].Lines)))
	}
	return nil
}
