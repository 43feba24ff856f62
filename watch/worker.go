package watch

import (
	"bufio"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// worker owns a share of the files (by path hash): their state is touched
// by this goroutine only. Its queue is a set of paths, so it is bounded by
// the number of files however often they change.
type worker struct {
	t     *Tailer
	files map[string]*file
	bufs  *buffers // the round's, from roundBufs; nil between rounds

	mu       sync.Mutex
	dirty    map[string]struct{}
	barriers []chan struct{} // closed once the paths marked before them are handled
	wake     chan struct{}
	rx       retryExtra // retry.go
	grp      *group     // lines kept back for one batch (group.go); nil: none

	retry map[string]retryState
	// on is the file being handled now (slow.go); nil between files.
	on atomic.Pointer[reading]
	// bytesRead counts what this worker read from files (slow.go).
	bytesRead atomic.Int64
	// malformed holds back the warning of a file's malformed lines to one
	// a minute (malformedWarn).
	malformed map[string]malformedLog
}

// buffers are what a worker reads and hashes files with, taken from
// roundBufs for each round and put back after it: kept by each worker for
// good, eight of them held 2.5 MiB of an idle daemon's heap; the pool lets
// them go two collections after the last round, and a busy tailer reuses
// them as before.
type buffers struct {
	br   *bufio.Reader
	hash []byte // nil until a round needs it
}

var roundBufs = sync.Pool{New: func() any { return &buffers{br: bufio.NewReaderSize(nil, readBufSize)} }}

// scratch is the round's buffer for hashing a range of a file.
func (w *worker) scratch() []byte {
	if w.bufs.hash == nil {
		w.bufs.hash = make([]byte, 64<<10)
	}
	return w.bufs.hash
}

type retryState struct {
	at       time.Time
	attempts int
	logged   bool // its failure was logged: so is its recovery
}

func (w *worker) mark(path string) {
	w.mu.Lock()
	w.dirty[path] = struct{}{}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) barrier(ch chan struct{}) {
	w.mu.Lock()
	w.barriers = append(w.barriers, ch)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) take() (map[string]struct{}, []chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, b := w.dirty, w.barriers
	// Not sized after the round taken: a map keeps its room when emptied,
	// and one sized for a first read's thousand files a worker held, empty,
	// for as long as the daemon then stayed idle.
	w.dirty, w.barriers = make(map[string]struct{}), nil
	return d, b
}

func (w *worker) run(ctx context.Context) {
	w.retry = make(map[string]retryState)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
		paths, barriers := w.take()
		w.pending(paths, time.Now())
		w.bufs = roundBufs.Get().(*buffers)
		if len(paths) > 1 {
			w.grp = &group{} // several files: publish their lines together
		}
		for p := range paths {
			if ctx.Err() != nil {
				w.dropGroup()
				return
			}
			w.handle(ctx, p)
		}
		w.flushGroup(ctx)
		w.grp = nil
		w.bufs.br.Reset(nil) // let go of the file
		roundBufs.Put(w.bufs)
		w.bufs = nil
		for p := range paths {
			_, retrying := w.retry[p]
			w.t.settle(p, w.files[p], retrying)
		}
		for _, b := range barriers {
			close(b)
		}
		next := time.Hour
		for _, r := range w.retry {
			next = min(next, max(time.Until(r.at), time.Millisecond))
		}
		timer.Reset(next)
	}
}
