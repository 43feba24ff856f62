package watch

import (
	"sync/atomic"
	"time"
)

// A session file found gone is a deletion only once a walk confirms it: a
// walk that starts after the removals have settled (no removal seen for
// deleteSettle) and finds the sessions dir there, with session files in
// it. rm -rf of the sessions dir, or of every folder in it, unlinks the
// files one by one before their folders go, and fsnotify reports each
// removal while the sessions dir is still there: without the wait, the
// sessions whose removal came first were published deleted, and every
// other machine moved its copy to the trash, where a sessions dir gone is
// an outage (discovery.away). fsnotify is the hint, the walk the truth.
//
// A removal asks for a walk deleteSettle after it (Tailer.removed); removals
// that keep coming (a large tree being removed) put it off, and the
// periodic walk confirms nothing while they do. A deletion waits at least
// deleteSettle and at most about that plus the time the removals take.
const deleteSettle = 2 * time.Second

// deletions holds the paths whose deletion waits for a walk to confirm it,
// each with the walk generation it was seen gone in (awaiting, guarded by
// Tailer.mu), how removals ask discovery for a walk (soon), when a removal
// was last seen, and the walks begun and the last that confirmed what was
// seen gone before it.
type deletions struct {
	settle   time.Duration // deleteSettle; tests make it longer
	awaiting map[string]uint64
	// soon asks discovery for a walk once removals settle.
	soon                  chan struct{}
	removedAt             atomic.Int64 // UnixNano
	walkGen, confirmedGen atomic.Uint64
}

// removed notes a removal just seen (an event, or a worker finding a
// followed file gone), which puts off the confirming walk.
func (t *Tailer) removed() {
	t.dels.removedAt.Store(time.Now().UnixNano())
	select {
	case t.dels.soon <- struct{}{}:
	default:
	}
}

// awaitDeletion reports whether the deletion of path is confirmed by a
// walk; if not, it holds path until one does (and submits it then).
func (t *Tailer) awaitDeletion(path string) (confirmed bool) {
	t.mu.Lock()
	gen, held := t.dels.awaiting[path]
	if !held {
		gen = t.dels.walkGen.Load()
		t.dels.awaiting[path] = gen
	}
	t.mu.Unlock()
	if !held {
		t.removed()
	}
	return t.dels.confirmedGen.Load() > gen
}

// deletionDone lets go of path: its deletion is published, or the file is
// back.
func (t *Tailer) deletionDone(path string) {
	t.mu.Lock()
	delete(t.dels.awaiting, path)
	t.mu.Unlock()
}

// removalsSettled reports whether a walk starting at start may confirm deletions:
// no removal was seen for deleteSettle before it.
func (t *Tailer) removalsSettled(start time.Time) bool {
	return start.UnixNano()-t.dels.removedAt.Load() >= int64(t.dels.settle)
}

// confirmDeletions records that walk gen found the sessions dir there, with
// session files in it, after the removals settled, and hands every path
// seen gone before it back to its worker, which publishes the deletion.
func (t *Tailer) confirmDeletions(gen uint64) {
	t.dels.confirmedGen.Store(gen)
	var due []string
	t.mu.Lock()
	for p, g := range t.dels.awaiting {
		if g < gen {
			due = append(due, p)
		}
	}
	t.mu.Unlock()
	for _, p := range due {
		t.submit(p)
	}
}
