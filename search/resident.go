package search

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2/index/scorch"
)

// The index's segment files are memory-mapped (bleve's zap format), and the
// pages a merge or a query reads stay in this process's resident set for as
// long as the file is mapped: a first build of 1 GiB of sessions peaked at
// 728 MiB, by estimate 500 MiB of it such pages, beyond the whole daemon's
// budget (docs/PERFORMANCE.md, "Search"). They are clean pages of files, kept in
// the page cache whether mapped or not: the trimmer drops them from the
// process's mappings (madvise MADV_DONTNEED) every trimEvery while the index
// is in use, so they stay at what the merges and queries of one interval
// read. A page read again is mapped again from the page cache (a minor
// fault), not read from disk.

const (
	// trimEvery is how often the mapped pages are dropped while the index
	// is in use.
	trimEvery = 100 * time.Millisecond
	// trimIdleAfter is how long after the last write or search the
	// trimmer keeps running: bleve merges segments in the background after
	// a write, for up to minutes after a large build's last batch.
	trimIdleAfter = 2 * time.Minute
)

// trimmer owns the goroutine that drops the index's mapped pages.
type trimmer struct {
	kick   chan struct{} // a write or a search: trim for trimIdleAfter
	last   atomic.Int64  // unix nanoseconds of the last kick
	cancel context.CancelFunc
	done   chan struct{}
}

// startTrimmer starts ix's trimmer; ix.Close stops it.
func (ix *Index) startTrimmer() {
	ctx, cancel := context.WithCancel(context.Background())
	t := &trimmer{kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	ix.trim = t
	go func() {
		defer close(t.done)
		t.run(ctx, ix.trimMapped)
	}()
}

// touch says the index is in use.
func (t *trimmer) touch() {
	t.last.Store(time.Now().UnixNano())
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

func (t *trimmer) stop() {
	t.cancel()
	<-t.done
}

func (t *trimmer) run(ctx context.Context, trim func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		}
		tick := time.NewTicker(trimEvery)
		for time.Since(time.Unix(0, t.last.Load())) < trimIdleAfter {
			select {
			case <-ctx.Done():
				tick.Stop()
				return
			case <-tick.C:
			}
			trim()
		}
		tick.Stop()
		trim()
	}
}

// trimMapped drops the resident pages of the current snapshot's segment
// files from this process's mappings. The snapshot holds a reference on
// each segment while this runs, so none is unmapped under the madvise.
func (ix *Index) trimMapped() {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return
	}
	adv, err := ix.idx.Advanced()
	if err != nil {
		return
	}
	sc, ok := adv.(*scorch.Scorch)
	if !ok {
		return
	}
	r, err := sc.Reader()
	if err != nil {
		return
	}
	defer r.Close()
	if snap, ok := r.(*scorch.IndexSnapshot); ok {
		trimSnapshot(snap)
	}
}

// trimSnapshot drops the resident pages of snap's segment files; the
// caller holds snap.
func trimSnapshot(snap *scorch.IndexSnapshot) {
	for _, seg := range snap.Segments() {
		// Only a segment read from a file has Data (its mapping); one
		// still in memory is on the heap.
		if m, ok := seg.Segment().(interface{ Data() []byte }); ok {
			dropResident(m.Data())
		}
	}
}
