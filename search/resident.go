package search

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
)

// The index's segment files are memory-mapped (bleve's zap format), and the
// pages a merge or a query reads stay in this process's resident set for as
// long as the file is mapped: a first build of 1 GiB of sessions peaked at
// 728 MiB, by estimate 500 MiB of it such pages, beyond the whole daemon's
// budget (docs/PERFORMANCE.md, "Search"). They are clean pages of files, kept in
// the page cache whether mapped or not: the trimmer drops them from the
// process's mappings (madvise MADV_DONTNEED) every trimEvery while anything
// reads the segments, so they stay at what one interval read. A page read
// again is mapped again from the page cache (a minor fault), not read from
// disk.
//
// What reads them: this package's writes (a batch looks up the documents it
// replaces), searches and erasures, each of which the trimmer is told about
// (enter, exit), and scorch's merger and persister, which run on their own
// after a write, for up to minutes after a large build's last batch. scorch
// reports those through its event callback: a merge from its check to its
// progress. So the trimmer runs while work is under way and once after it,
// and sleeps otherwise: an index written a line at a time (a live session)
// costs a few trims a write, not ten a second.

// trimEvery is how often the mapped pages are dropped while the segments
// are read.
const trimEvery = 100 * time.Millisecond

// trimmer owns the goroutine that drops the index's mapped pages.
type trimmer struct {
	kick    chan struct{} // the segments were read, or are being read: trim after trimEvery
	active  atomic.Int32  // writes, searches and erasures under way
	merging atomic.Bool   // scorch's merger is between a merge check and its progress
	trims   atomic.Int64  // trims done (metric search_trims_total)
	merges  atomic.Int64  // merge rounds scorch reported (metric search_merges_total)
	cancel  context.CancelFunc
	done    chan struct{}
	// failed is called on scorch's asynchronous errors (a merge or a
	// persist that failed); set before the index is opened.
	failed func()
}

func newTrimmer() *trimmer {
	return &trimmer{kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// start starts the goroutine that calls trim (an index's trimMapped, after
// its idx is set); stop stops it.
func (t *trimmer) start(trim func()) {
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	go func() {
		defer close(t.done)
		t.run(ctx, func() {
			trim()
			t.trims.Add(1)
		})
	}()
}

func (t *trimmer) poke() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// enter says that work reading the segments begins; exit, that it ended.
func (t *trimmer) enter() { t.active.Add(1); t.poke() }
func (t *trimmer) exit()  { t.active.Add(-1); t.poke() }

// event is the index's scorch event callback. A merge whose planning
// fails fires no progress: the trimmer then goes on until the next merge's,
// as it did for every index in use before.
func (t *trimmer) event(e scorch.Event) bool {
	switch e.Kind {
	case scorch.EventKindPreMergeCheck:
		t.merging.Store(true)
		t.poke()
	case scorch.EventKindMergerProgress:
		t.merging.Store(false)
		t.merges.Add(1)
		t.poke()
	case scorch.EventKindPersisterProgress:
		t.poke()
	}
	return true // a merge check: go on with the merge
}

// asyncError is the index's scorch error callback: a merge or a persist
// failed (scorch retries it), and the index may be damaged.
func (t *trimmer) asyncError(error, string) {
	if t.failed != nil {
		t.failed()
	}
}

// stop stops the goroutine; a trimmer never started has none.
func (t *trimmer) stop() {
	if t.cancel == nil {
		return
	}
	t.cancel()
	<-t.done
}

func (t *trimmer) run(ctx context.Context, trim func()) {
	timer := time.NewTimer(trimEvery)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		}
		for again := true; again; again = t.again() {
			timer.Reset(trimEvery)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			trim()
		}
	}
}

// again reports whether to trim once more after trimEvery: something read
// the segments since the last trim began (a kick), or work or a merge is
// under way. The kick is taken first: an exit after the count was read
// leaves its kick for the next round.
func (t *trimmer) again() bool {
	select {
	case <-t.kick:
		return true
	default:
	}
	return t.active.Load() > 0 || t.merging.Load()
}

// scorch finds an index's event callback by name in its package's
// registry, read when the index is opened or made. eventsMu keeps this
// package's writes to that map apart from the reads of its other opens:
// no one else in pisyncd opens a scorch index.
var (
	eventsMu   sync.Mutex
	eventsNext int
)

// withEvents runs open, which opens or makes one index, with a scorch
// config that hands the index's events to t. scorch keeps the callback
// itself, so its name is in the registry for the open alone (an index
// made keeps the name in its index_meta.json; every open here names
// another).
func (t *trimmer) withEvents(open func(config map[string]any) (bleve.Index, error)) (bleve.Index, error) {
	eventsMu.Lock()
	defer eventsMu.Unlock()
	eventsNext++
	name := "pisyncd-search-" + strconv.Itoa(eventsNext)
	scorch.RegistryEventCallbacks[name] = t.event
	defer delete(scorch.RegistryEventCallbacks, name)
	scorch.RegistryAsyncErrorCallbacks[name] = t.asyncError
	defer delete(scorch.RegistryAsyncErrorCallbacks, name)
	return open(map[string]any{"eventCallbackName": name, "asyncErrorCallbackName": name})
}

// trimMapped drops the resident pages of the current snapshot's segment
// files from this process's mappings. The snapshot holds a reference on
// each segment while this runs, so none is unmapped under the madvise.
func (ix *Index) trimMapped() {
	if ix.broken.Load() {
		return // its next use opens it again
	}
	var err error // a panic in bleve: the index is marked broken
	ix.mu.RLock()
	defer ix.runlock(&err)
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
