package main

import (
	"context"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// The embedded server holds memory of a burst of writes past its end: a
// message block's cache (a pooled buffer of 1-8 MiB: 24 MiB after a first
// read of 10,000 sessions) is dropped when the block has been unused for
// 10 s (the filestore's cache expiry) and goes back to a sync.Pool, whose
// contents outlive one collection: two free it. (The duplicate window's
// message ids were a second kind until the local log stopped stamping
// them: eventlog.OpenLocal.)
//
// An idle daemon allocates little, so its next collection, and with it
// the return of those pages, could be minutes away (the runtime forces
// one every two minutes, and then returns freed pages slowly).
const blockCacheExpiry = 10*time.Second + 2*time.Second // with a margin for the server's timer tick

// subjectStateExpiry is when the embedded server has dropped what it keeps
// of a message block's subjects (a tree per block, beside the stream's own
// index), two minutes after the block's last use, counted like
// blockCacheExpiry: after a first read of 10,000 sessions the live heap
// falls by 4-5 MB then (docs/PERFORMANCE.md, "The server's subject state").
// The runtime would keep those pages; the give-back after it returns them.
const subjectStateExpiry = 2*time.Minute + 5*time.Second

// startGCPercent is the collector's target while the daemon starts again
// over a store that holds lines (until afterFirstRead gives the start's
// memory back). Go does not move objects: what a restart keeps for good
// (the catalog read back, the tailer's records, the first messages) is
// allocated among the garbage of resuming every file and reading every
// session back, and a span holding one kept object stays in use.
// Collecting four times as often keeps that garbage, and so the spans the
// kept objects end up spread over, small. Measured with 10,000 sessions
// (docs/PERFORMANCE.md, "A restart's garbage"): a restart's peak 174-180 MB
// instead of 287-295 MB, its CPU and the resident set after it unchanged
// (without it, the restart's allocations cut by 2.6 GB left 11 MB more
// resident). A first start is left at 100 %: its read of every file is
// CPU-bound, and 25 % cost it 1.8 CPU-seconds (a third more) for 8 MB less
// resident after it.
const startGCPercent = 25

// startGC counts the daemons of this process that are starting (tests run
// several): the percent is the runtime's, one for the process, so the
// first to start sets it and the last to finish puts back what was there.
var startGC struct {
	mu      sync.Mutex
	holders int
	prev    int
}

// holdStartGC sets the collector to startGCPercent until the returned
// func is called (once or more). A GOGC set by the user is left alone.
func holdStartGC() (release func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	startGC.mu.Lock()
	if startGC.holders == 0 {
		startGC.prev = debug.SetGCPercent(startGCPercent)
	}
	startGC.holders++
	startGC.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			startGC.mu.Lock()
			defer startGC.mu.Unlock()
			if startGC.holders--; startGC.holders == 0 {
				debug.SetGCPercent(startGC.prev)
			}
		})
	}
}

// startGCBytes and startGCFileBytes end the lower target early for a start
// that reads bulk: more than startGCBytes, and more than startGCFileBytes a
// file tracked (one long session, images), whose garbage is not the
// problem; collecting four times as often made the first read of one
// 200 MB session cost about a fifth more CPU. A first read of 10,000 small
// sessions reads 15 MB, a restart over them 49 MB (4.9 KB a file).
const (
	startGCBytes     = 32 << 20
	startGCFileBytes = 64 << 10
)

// startGCLimit bounds how long a start keeps the lower target after the
// first read is projected: a node that never goes quiet (a hub's traffic
// arriving without pause) must not pay for it for good.
const startGCLimit = time.Minute

// endStartGC ends the start's collector target, which the returned func
// does at the latest (once or more): before it, once the tailer has read
// bulk (checked every 250 ms), or startGCLimit after the catch-up. A
// no-op for a daemon that holds no target.
func (d *Daemon) endStartGC() (end func()) {
	if d.releaseGC == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer d.releaseGC()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		caughtUp, limit := d.caughtUp, (<-chan time.Time)(nil)
		for {
			select {
			case <-done:
				return
			case <-caughtUp:
				caughtUp, limit = nil, time.After(startGCLimit)
			case <-limit:
				return
			case <-tick.C:
				if st := d.tailer.Stats(); st.BytesRead > startGCBytes+startGCFileBytes*st.FilesTracked {
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// afterFirstRead gives the memory of the start's burst back to the system
// once the tailer has read every file present at start and the store's
// readers have caught up with it (quiet): at once (the lines, batches and
// views of the burst: tens of megabytes for thousands of sessions), and
// again once the server dropped its block caches. Each is a collection and
// a scavenge, a few milliseconds of CPU. It reports whether it gave the
// memory back (not when the store's readers could not be asked, or ctx
// ended).
func (d *Daemon) afterFirstRead(ctx context.Context) bool {
	endGC := d.endStartGC()
	defer endGC()
	select {
	case <-d.tailer.Ready():
	case <-ctx.Done():
		return false
	}
	err := d.firstReadProjected(ctx)
	close(d.caughtUp)
	if err == nil {
		err = d.quiet(ctx)
	}
	endGC()
	if err != nil {
		return false // giveBack takes it back once the daemon is quiet
	}
	t := time.NewTimer(blockCacheExpiry) // counted from the catch-up, not from the collection's end
	debug.FreeOSMemory()
	return d.releaseAt(ctx, t)
}

// afterSubjectState gives memory back once more when the server has let
// go of the start's subject state (subjectStateExpiry after the catch-up
// that afterFirstRead waited for), once the store's readers are quiet.
// It reports whether it did, as afterFirstRead.
func (d *Daemon) afterSubjectState(ctx context.Context) bool {
	return d.releaseAt(ctx, time.NewTimer(subjectStateExpiry-blockCacheExpiry)) // afterFirstRead waited that long already
}

// releaseAt gives memory back (releaseMemory) when t fires and the store's
// readers are quiet, and reports whether it did (not when they could not
// be asked, or ctx ended).
func (d *Daemon) releaseAt(ctx context.Context, t *time.Timer) bool {
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return false
	}
	if d.quiet(ctx) != nil {
		return false
	}
	releaseMemory(d.logger, d.dropRebuildable)
	return true
}

// firstReadProjected waits until the projection has handled what the
// tailer's first read published. The search index starts then: indexing
// alongside the projection's catch-up made both slower on two cores and
// held both their memory at once (a first read of 10,000 sessions peaked
// at 345-379 MB, 231-260 MB with this; docs/PERFORMANCE.md). Unlike quiet
// it waits for one position, so sessions being written do not hold the
// index back.
func (d *Daemon) firstReadProjected(ctx context.Context) error {
	info, err := d.log.Info(ctx)
	if err != nil {
		return err
	}
	return d.proj.WaitHandled(ctx, eventlog.LocalStream, info.LastSeq)
}

// quiet waits until every reader of the store (the projection, its read
// of the first messages back after a restart, and the search index when it
// is on) has read what the streams hold, PI_ALL's copy from the hub
// included, no new message came meanwhile, and the downloader copies no
// backlog the hub has for this node. A collection and scavenge of a heap in
// full use costs hundreds of milliseconds of CPU: it belongs after the
// work. It cost a catch-up from the hub 0.6 s where it was first called,
// and again a tenth of the catch-up's CPU where the readers caught up with
// PI_ALL between two of the downloader's rounds. And the block caches a
// reader loads expire 10 s after its last read: counted from the
// projection alone, the collection meant for them raced the first
// messages' read after a restart (one restart in two) and the index's
// first pass, which starts once the projection has caught up
// (docs/PERFORMANCE.md).
func (d *Daemon) quiet(ctx context.Context) error {
	select {
	case <-d.proj.FirstMessagesFilled():
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	readers := []interface {
		WaitHandled(ctx context.Context, stream string, seq uint64) error
	}{d.proj}
	if d.searchW != nil {
		readers = append(readers, d.searchW)
	}
	lasts := func() (uint64, uint64, error) {
		info, err := d.log.Info(ctx)
		if err != nil || d.all == nil {
			return info.LastSeq, 0, err
		}
		ai, err := d.all.Stream().Info(ctx)
		if err != nil {
			return 0, 0, err
		}
		return info.LastSeq, ai.State.LastSeq, nil
	}
	local, all, err := lasts()
	for err == nil {
		for _, r := range readers {
			if err := r.WaitHandled(ctx, eventlog.LocalStream, local); err != nil {
				return err
			}
			if err := r.WaitHandled(ctx, eventlog.AllStream, all); err != nil {
				return err
			}
		}
		if d.dl != nil {
			// A catch-up from the hub is not quiet between its rounds:
			// what it stored meanwhile shows in PI_ALL's last sequence.
			select {
			case <-d.dl.Idle():
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		l, a, lerr := lasts()
		if lerr == nil && l == local && a == all {
			return nil
		}
		local, all, err = l, a, lerr
	}
	return err
}
