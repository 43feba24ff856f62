package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/pisyncd/pisyncd/internal/codepages"
)

// An idle daemon keeps the memory of its last burst. The Go runtime
// returns freed pages only above what it expects to need again, about
// the heap's size at its last collection (twice what is live, with
// GOGC=100), so after a burst (a catch-up from the hub, a large session,
// the embedded server writing its index of 50,000 KV keys at its
// two-minute sync) the resident set stays where the burst took it:
// with 10,000 sessions, 100-104 MB a minute after the first read and
// 110-117 MB after three (docs/PERFORMANCE.md, "Memory after a burst").
// A GOGC set by the user turns it off, as it does the start's target.
// afterFirstRead gives the first read's memory back; giveBack does it for
// whatever comes after, for as long as the daemon runs.

// giveBackEvery is how often giveBack looks: a read of four runtime
// counters, no stop of the world.
const giveBackEvery = 5 * time.Second

// giveBackQuiet is how long the process must have allocated little
// before its memory is given back (a collection and scavenge of a heap in
// full use costs hundreds of milliseconds: not in the middle of work),
// and quietAlloc what "little" is per look: an idle daemon with 10,000
// sessions allocates 10-70 KB a look, and 5-7 MB in the look of its
// full walk of the sessions tree (once a minute) or of the server's sync.
// giveBackQuiet covers the embedded server's block caches, which go 10 s
// after their last use to a pool that a second collection empties.
const (
	giveBackQuiet = blockCacheExpiry + giveBackEvery
	quietAlloc    = 2 << 20
)

// giveBackSlack is how far the heap's pages (objects, live or dead,
// and free pages not yet returned) may grow past what they were after the
// last give-back before another: at least minGiveBackSlack, else an
// eighth of them. Each give-back costs two collections of the whole heap
// (50-75 ms with 10,000 sessions), and giveBackGap spaces them: the
// runtime's own pace when idle (it collects every two minutes), so that
// a daemon allocating just under quietAlloc a look (a live session, a
// slow link) pays at most one every two minutes, where the slack alone
// would have it pay one every 20 s. A heap grown past bigGrowth (at least
// minBigGrowth, else half the base) is given back once quiet without
// waiting for the gap: ten thousand sessions written while the daemon ran
// held 360 MB for a minute more after their burst, waiting for it. Such
// growth is paid for in allocation (32 MiB is 80 s of looks just under
// quietAlloc), so the gap's bound on a trickle's cost stays.
const (
	minGiveBackSlack = 4 << 20
	giveBackGap      = 2 * time.Minute
	minBigGrowth     = 32 << 20
)

// heapSample is what giveBack reads of the runtime.
type heapSample struct {
	allocs uint64 // bytes allocated since the process started
	pages  uint64 // heap pages held from the system: objects, unused parts of spans, free
}

// giveBackState decides, look by look, when to give memory back.
type giveBackState struct {
	last       heapSample
	base       uint64 // pages after the last give-back (or at the start)
	quietSince int    // looks in a row with little allocated
	sinceLast  int    // looks since the last give-back
}

// newGiveBackState starts from s; settled says that the pages of s are
// what the process holds after a give-back. When they are not (the first
// read's could not be given back), the first quiet stretch gives back.
func newGiveBackState(s heapSample, settled bool) giveBackState {
	g := giveBackState{last: s, base: s.pages}
	if !settled {
		g.base, g.sinceLast = 0, int(giveBackGap/giveBackEvery)
	}
	return g
}

// look takes one sample and reports whether to give memory back now.
func (g *giveBackState) look(s heapSample) bool {
	if s.allocs-g.last.allocs > quietAlloc {
		g.quietSince = 0
	} else {
		g.quietSince++
	}
	g.last = s
	g.sinceLast++
	// The runtime returns pages of its own accord too (near the memory
	// budget's soft limit): the base follows them down.
	g.base = min(g.base, s.pages)
	slack, bigGrowth := max(uint64(minGiveBackSlack), g.base/8), max(uint64(minBigGrowth), g.base/2)
	if time.Duration(g.quietSince)*giveBackEvery < giveBackQuiet || s.pages <= g.base+slack {
		return false
	}
	return time.Duration(g.sinceLast)*giveBackEvery >= giveBackGap || s.pages > g.base+bigGrowth
}

// gaveBack records the pages held after a give-back.
func (g *giveBackState) gaveBack(s heapSample) {
	g.last, g.base, g.sinceLast = s, s.pages, 0
}

var heapMetrics = [...]string{
	"/gc/heap/allocs:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

// samples is a buffer for metrics.Read of the named counters.
func samples(names ...string) []metrics.Sample {
	buf := make([]metrics.Sample, len(names))
	for i, name := range names {
		buf[i].Name = name
	}
	return buf
}

// readHeap reads a heapSample from the runtime.
func readHeap(buf []metrics.Sample) heapSample {
	metrics.Read(buf)
	var s heapSample
	s.allocs = buf[0].Value.Uint64()
	for _, m := range buf[1:] {
		s.pages += m.Value.Uint64()
	}
	return s
}

// heapStatus is the Go heap as status shows it: what the last collection
// found live, and the pages the heap holds for it (objects, live or not
// yet collected, and the unused room in their spans). The gap between the
// two is garbage and fragmentation; the resident set adds the binary's
// pages, stacks and the runtime's own.
type heapStatus struct {
	LiveBytes  uint64 `json:"liveBytes"`
	InUseBytes uint64 `json:"inUseBytes"`
}

var heapStatusMetrics = [...]string{
	"/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
}

// readHeapStatus reads the runtime's counters (no stop of the world).
func readHeapStatus() heapStatus {
	buf := samples(heapStatusMetrics[:]...)
	metrics.Read(buf)
	return heapStatus{LiveBytes: buf[0].Value.Uint64(), InUseBytes: buf[1].Value.Uint64() + buf[2].Value.Uint64()}
}

// giveBack returns the heap's free memory to the system whenever the
// process has been quiet for giveBackQuiet and holds giveBackSlack more
// than after the last time, until ctx ends; settled as for
// newGiveBackState. The counters are the process's: where a process runs
// several daemons (tests), each gives back for all of them. drop, when not
// nil, lets go first of what the caller can rebuild (releaseMemory).
func giveBack(ctx context.Context, logger *slog.Logger, settled bool, drop func()) {
	buf := samples(heapMetrics[:]...)
	g := newGiveBackState(readHeap(buf), settled)
	tick := time.NewTicker(giveBackEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s := readHeap(buf)
		if !g.look(s) {
			continue
		}
		start := time.Now()
		releaseMemory(logger, drop)
		g.gaveBack(readHeap(buf))
		logger.Debug("gave memory back", "heapBefore", s.pages, "heapAfter", g.base, "took", time.Since(start))
	}
}

// releaseMemory gives what the process holds and does not use back to
// the system: the heap's free pages (two collections: a pooled buffer is
// only freed by the second), and the pages of the executable's code and
// read-only data it holds (codepages.Drop): a burst ran code an idle
// daemon does not, and the kernel mapped 64 KiB around each page it
// touched. What runs next is mapped again from the page cache. drop, when
// not nil, runs first: what it lets go of is collected with the rest.
func releaseMemory(logger *slog.Logger, drop func()) {
	if drop != nil {
		drop()
	}
	debug.FreeOSMemory()
	debug.FreeOSMemory()
	n, err := codepages.Drop()
	if err != nil {
		logger.Debug("the executable's pages kept", "err", err)
		return
	}
	logger.Debug("the executable's pages let go", "mapped", n)
}

// dropRebuildable lets go of what the daemon holds in memory only to be
// quick and can rebuild when next needed: the projection's trees of small
// sessions (projection.Worker.DropSmallTrees).
func (d *Daemon) dropRebuildable() {
	if d.proj == nil {
		return
	}
	if n := d.proj.DropSmallTrees(); n > 0 {
		d.logger.Debug("small session trees let go", "trees", n)
	}
}
