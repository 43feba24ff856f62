package watch

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
)

// Remove unlinks session files for an erase, and returns once the tailer
// has let go of them. Each file is first marked as moved away (see
// Forget), so its disappearance is no deletion to publish; then every
// worker that owns one of the paths looks at it again. A read that began
// before the unlink (a worker holds the open file) ends before that look,
// so once Remove returns no line of these files can be published any more,
// and the tailer holds no state of a session whose last file went: the
// caller may erase the session's lines from the stream without the tailer
// taking them for lines to publish again. A path that is already gone is
// not an error.
func (t *Tailer) Remove(ctx context.Context, paths []string) error {
	var errs []error
	var removed []string
	for _, p := range paths {
		undo := t.Forget(p)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			undo()
			errs = append(errs, fmt.Errorf("watch: remove %s: %w", p, err))
			continue
		}
		removed = append(removed, p)
	}
	waits := map[*worker]chan struct{}{}
	for _, p := range removed {
		w := t.workerOf(p)
		w.mark(p)
		if waits[w] == nil {
			waits[w] = make(chan struct{})
		}
	}
	for w, ch := range waits {
		w.barrier(ch)
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return errors.Join(append(errs, fmt.Errorf("watch: remove: %w", ctx.Err()))...)
		}
	}
	// A path no worker followed keeps its mark: take it back, or a file
	// made there later would vanish unannounced.
	t.mu.Lock()
	for _, p := range removed {
		delete(t.moved, p)
	}
	t.mu.Unlock()
	return errors.Join(errs...)
}

// workerOf is the worker that owns path.
func (t *Tailer) workerOf(path string) *worker {
	return t.workers[maphash.String(t.seed, path)%uint64(len(t.workers))]
}
