package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/metrics"
)

// A file whose sync fails (its publish failed: a full disk under the store,
// an unreadable file) is tried again after a pause that doubles from
// retryMin to retryMax. The pause holds however often the file changes
// meanwhile: pi keeps appending to a session while the disk is full, and
// each append would otherwise be one more failed publish.
const (
	retryMin = 50 * time.Millisecond
	retryMax = 10 * time.Second
)

// retryExtra is the worker's share of the retry machinery beyond its
// retry map: control requests (guarded by the worker's mu), the count of
// failing files others may read, and when each began to fail.
type retryExtra struct {
	ctl      []func(paths map[string]struct{})
	retrying atomic.Int64
	since    map[string]time.Time
}

// pending runs the control requests sent to the worker, adds the paths whose
// retry is due and holds back those whose retry is not: they are handled
// when it is.
func (w *worker) pending(paths map[string]struct{}, now time.Time) {
	w.mu.Lock()
	ctl := w.rx.ctl
	w.rx.ctl = nil
	w.mu.Unlock()
	for _, f := range ctl {
		f(paths)
	}
	for p, r := range w.retry {
		if r.at.After(now) {
			delete(paths, p)
		} else {
			paths[p] = struct{}{}
		}
	}
}

// failLogMax is how many failing files the log names while they fail at
// once. A store that takes no writes (a full disk) fails every file alike:
// 3,000 sessions made 3,000 warnings in a second, and as many lines when
// they were published again. Past it, one line says more files fail, and
// one says when every file is published again; status counts them.
const failLogMax = 5

// failLog is the tailer's count of failing files the log named, and
// whether it said that more fail.
type failLog struct {
	named atomic.Int64
	more  atomic.Bool
}

// handle syncs one path. A failure is retried with back-off; the log says
// once when a file starts failing and once when it is published again
// (for the first failLogMax failing at once; then once for the rest).
func (w *worker) handle(ctx context.Context, path string) {
	w.begin(path)
	err := w.sync(ctx, path)
	w.end()
	r, failing := w.retry[path]
	if err == nil {
		if failing {
			delete(w.retry, path)
			w.rx.retrying.Add(-1)
			if r.logged {
				w.t.failLog.named.Add(-1)
				w.t.logger.Info("session file published again", "path", path,
					"failed_attempts", r.attempts, "after", time.Since(w.rx.since[path]).Round(time.Millisecond))
			}
			delete(w.rx.since, path)
			if w.t.Retrying() == 0 && w.t.failLog.more.CompareAndSwap(true, false) {
				w.t.logger.Info("every session file is published again")
			}
		}
		return
	}
	w.failed(ctx, path, err)
}

// failed schedules another attempt at path after a failure.
func (w *worker) failed(ctx context.Context, path string, err error) {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	r, failing := w.retry[path]
	if !failing {
		if w.rx.since == nil {
			w.rx.since = make(map[string]time.Time)
		}
		w.rx.since[path] = time.Now()
		w.rx.retrying.Add(1)
	}
	r.attempts++
	backoff := min(retryMin<<min(r.attempts-1, 16), retryMax)
	r.at = time.Now().Add(backoff)
	w.retry[path] = r
	msg := err.Error()
	w.t.lastErr.Store(&msg)
	if r.attempts == 1 {
		if w.t.failLog.named.Add(1) <= failLogMax {
			r.logged = true
			w.retry[path] = r
			attrs := []any{"path", path, "err", err, "store_unavailable", errors.Is(err, eventlog.ErrStoreUnavailable)}
			if errors.Is(err, fs.ErrPermission) {
				// The mend, where only the cause was named (a files
				// probe, 2026-12-07); the retries pick it up.
				attrs = append(attrs, "hint", "this user may not read the file: chmod u+r "+path+" (and u+rx on its folders); it is published once it can be read")
			}
			w.t.logger.Warn("session file not published; retrying with back-off until it is", attrs...)
			return
		}
		w.t.failLog.named.Add(-1)
		if w.t.failLog.more.CompareAndSwap(false, true) {
			w.t.logger.Warn("more session files are not published; the log names no more of them, and says when every file is published again (status: filesRetrying)",
				"err", err, "store_unavailable", errors.Is(err, eventlog.ErrStoreUnavailable))
		}
	}
}

// control queues f to run on the worker's goroutine, which owns its files.
func (w *worker) control(f func(paths map[string]struct{})) {
	w.mu.Lock()
	w.rx.ctl = append(w.rx.ctl, f)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Reload makes the tailer forget what it learned from the event log and
// where it stood in each file, as a restart would, and returns once every
// worker has. The owner of the store calls it after the store was brought
// back (the embedded server restarted): while it was failing, reads may
// have returned messages that were only in the failing store's memory,
// and a line believed stored must be checked against what the store
// holds now. Publishing must stay held back (eventlog.Writable) until
// Reload returns; RetryNow then tries every file at once. Files are read
// again from the stream's resume point, so this costs about what the
// first read after a restart costs.
func (t *Tailer) Reload(ctx context.Context) error {
	for _, s := range t.sessionLogs() {
		s.mu.Lock()
		s.known = nil // read the subject again before the next publish
		s.mu.Unlock()
	}
	acks := make([]chan struct{}, len(t.workers))
	for i, w := range t.workers {
		ack := make(chan struct{})
		acks[i] = ack
		w.control(func(paths map[string]struct{}) {
			w.forget(paths)
			close(ack)
		})
	}
	for _, ack := range acks {
		select {
		case <-ack:
		case <-ctx.Done():
			return fmt.Errorf("watch: reload: %w", context.Cause(ctx))
		}
	}
	return nil
}

// Pause stops every worker between two steps and returns once all have
// stopped, with resume, which lets them go on and must be called (also
// after an error). The owner of the store pauses the tailer around a
// restart of the embedded server: a request in flight when the server
// goes down is never answered, and the worker that sent it would wait out
// its timeout (5 s) before it could confirm Reload. If ctx ends first,
// the workers that have not stopped yet stop at their next step, until
// resume.
func (t *Tailer) Pause(ctx context.Context) (resume func(), err error) {
	release := make(chan struct{})
	resume = sync.OnceFunc(func() { close(release) })
	acks := make([]chan struct{}, len(t.workers))
	for i, w := range t.workers {
		ack := make(chan struct{})
		acks[i] = ack
		w.control(func(map[string]struct{}) {
			close(ack)
			<-release
		})
	}
	for _, ack := range acks {
		select {
		case <-ack:
		case <-ctx.Done():
			return resume, fmt.Errorf("watch: pause: %w", context.Cause(ctx))
		}
	}
	return resume, nil
}

// forget drops what the worker knows of its files and marks each to be
// read again from its start. A file gone keeps its state, noticed or not
// (its deletion may have waited out a back-off): its tombstone may still
// have to be published.
func (w *worker) forget(paths map[string]struct{}) {
	for path, f := range w.files {
		paths[path] = struct{}{}
		if f.gone {
			continue
		}
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		w.t.untrack(f)
		f.reset()
	}
}

// RetryNow makes every failing file due at once: the store takes writes
// again, there is no reason to wait out the back-off.
func (t *Tailer) RetryNow() {
	for _, w := range t.workers {
		w.control(func(map[string]struct{}) {
			for p, r := range w.retry {
				r.at = time.Time{}
				w.retry[p] = r
			}
		})
	}
}

// Retrying is the number of files whose last sync failed and that wait for
// their next attempt.
func (t *Tailer) Retrying() int64 {
	var n int64
	for _, w := range t.workers {
		n += w.rx.retrying.Load()
	}
	return n
}

// RetryCollectors returns the metrics of the retries.
func (t *Tailer) RetryCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Gauge("files_retrying", "Session files whose last publish failed, waiting for their next attempt (back-off).", t.Retrying),
	}
}
