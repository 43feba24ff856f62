package main

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestGiveBackWaitsForQuiet: memory is given back only after the process
// has allocated little for giveBackQuiet, only when the heap holds more
// than the slack past the last give-back, and at most once a giveBackGap
// unless it grew past bigGrowth.
func TestGiveBackWaitsForQuiet(t *testing.T) {
	const mb = 1 << 20
	quietLooks := int((giveBackQuiet + giveBackEvery - 1) / giveBackEvery)
	gapLooks := int(giveBackGap / giveBackEvery)
	g := newGiveBackState(heapSample{allocs: 0, pages: 80 * mb}, true)
	s := heapSample{allocs: 0, pages: 80 * mb}
	step := func(alloc, pages uint64) bool {
		s.allocs += alloc
		s.pages = pages
		return g.look(s)
	}

	// A burst: the heap grows far past the base, but the process is busy.
	for range gapLooks {
		if step(50*mb, 200*mb) {
			t.Fatal("gave back while busy")
		}
	}
	// Quiet after it: nothing until giveBackQuiet has passed.
	for i := 1; i < quietLooks; i++ {
		if step(quietAlloc/2, 200*mb) {
			t.Fatalf("gave back after %d quiet looks, want %d", i, quietLooks)
		}
	}
	if !step(quietAlloc/2, 200*mb) {
		t.Fatalf("did not give back after %d quiet looks", quietLooks)
	}
	g.gaveBack(heapSample{allocs: s.allocs, pages: 90 * mb})

	// Quiet, the heap within the slack past the new base (an eighth of
	// 90 MB): nothing, however long.
	for range 100 {
		if step(quietAlloc/4, 90*mb+90*mb/8) {
			t.Fatal("gave back within the slack")
		}
	}
	// Past it (the server's sync writing its index): given back.
	if !step(quietAlloc/4, 90*mb+90*mb/8+1) {
		t.Fatal("did not give back past the slack")
	}
	g.gaveBack(heapSample{allocs: s.allocs, pages: 10 * mb})

	// Past the slack again at once (a trickle of garbage), short of
	// minBigGrowth: not before giveBackGap since the last give-back.
	for i := 1; i < gapLooks; i++ {
		if step(quietAlloc/2, 10*mb+minBigGrowth) {
			t.Fatalf("gave back %d looks after the last, want %d", i, gapLooks)
		}
	}
	if !step(quietAlloc/2, 10*mb+minBigGrowth) {
		t.Fatalf("did not give back %d looks after the last", gapLooks)
	}
	g.gaveBack(heapSample{allocs: s.allocs, pages: 10 * mb})

	// Past minBigGrowth (a burst of work) right after a give-back: given
	// back once quiet, the gap not waited for.
	step(50*mb, 10*mb+minBigGrowth+1)
	for i := 1; i < quietLooks; i++ {
		if step(0, 10*mb+minBigGrowth+1) {
			t.Fatalf("gave back a burst after %d quiet looks, want %d", i, quietLooks)
		}
	}
	if !step(0, 10*mb+minBigGrowth+1) {
		t.Fatal("did not give a burst back before the gap")
	}
	// A large base's bigGrowth is half of it: still quiet, the heap grown
	// by half of 200 MB is not given back before the gap, and past that is.
	g.gaveBack(heapSample{allocs: s.allocs, pages: 200 * mb})
	for range 3 {
		if step(0, 300*mb) {
			t.Fatal("gave back within half a large base before the gap")
		}
	}
	if !step(0, 300*mb+1) {
		t.Fatal("did not give back past half a large base before the gap")
	}
	g.gaveBack(heapSample{allocs: s.allocs, pages: 10 * mb})

	// A small heap's slack is minGiveBackSlack, not an eighth.
	for range gapLooks {
		if step(0, 10*mb+minGiveBackSlack) {
			t.Fatal("gave back within the least slack")
		}
	}
	if !step(0, 10*mb+minGiveBackSlack+1) {
		t.Fatal("did not give back past the least slack")
	}

	// Pages the runtime returned itself lower the base.
	g.gaveBack(heapSample{allocs: s.allocs, pages: 40 * mb})
	for range gapLooks - 1 {
		step(0, 20*mb)
	}
	if !step(0, 20*mb+minGiveBackSlack+1) {
		t.Fatal("the base did not follow the pages down")
	}

	// A start whose first read was not given back gives back at its
	// first quiet stretch, whatever the pages.
	u := newGiveBackState(heapSample{allocs: 0, pages: 200 * mb}, false)
	for i := 1; i <= quietLooks; i++ {
		if got := u.look(heapSample{allocs: 0, pages: 200 * mb}); got != (i == quietLooks) {
			t.Fatalf("unsettled start, quiet look %d: gave back %v", i, got)
		}
	}

	// One busy look starts the quiet stretch again.
	g.gaveBack(heapSample{allocs: s.allocs, pages: 10 * mb})
	for range gapLooks {
		step(0, 10*mb)
	}
	step(quietAlloc+1, 100*mb)
	for i := 1; i < quietLooks; i++ {
		if step(0, 100*mb) {
			t.Fatalf("gave back %d looks after a busy one", i)
		}
	}
	if !step(0, 100*mb) {
		t.Fatal("did not give back after the quiet stretch")
	}
}

// TestReadHeapNamesKnownMetrics: every counter giveBack reads exists in
// this Go (an unknown name reads as KindBad, and the heap as 0).
func TestReadHeapNamesKnownMetrics(t *testing.T) {
	buf := samples(heapMetrics[:]...)
	s := readHeap(buf)
	for _, m := range buf {
		if m.Value.Kind() != metrics.KindUint64 {
			t.Errorf("%s: kind %v, want uint64", m.Name, m.Value.Kind())
		}
	}
	if s.allocs == 0 || s.pages == 0 {
		t.Errorf("sample %+v: want both above 0", s)
	}
}

// TestGiveBackReturnsABurst: the worker, on the real runtime under fake
// time, gives back the pages of a burst once it has been quiet for
// giveBackQuiet, not before, lets go of what the daemon can rebuild and of
// the executable's pages with it, and returns when its context ends.
func TestGiveBackReturnsABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// What earlier tests of this process left free would take the
		// burst, and the worker's base would hold it already.
		debug.FreeOSMemory()
		var logged testenv.LogBuffer
		logger := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		var drops atomic.Int32
		go func() {
			giveBack(ctx, logger, true, func() { drops.Add(1) })
			close(done)
		}()
		synctest.Wait()         // its first sample taken: the base
		time.Sleep(giveBackGap) // as long after the start's give-back as it waits
		synctest.Wait()
		// Other tests of this process may have made it give back already.
		gave := func() int { return strings.Count(logged.String(), "gave memory back") }
		before := gave()
		burst := make([][]byte, 64)
		for i := range burst {
			burst[i] = make([]byte, 1<<20)
			burst[i][0] = 1
		}
		runtime.KeepAlive(burst)
		burst = nil
		runtime.GC() // the burst's pages are free now, and still held
		buf := samples(heapMetrics[:]...)
		held := readHeap(buf).pages

		// The first look sees the burst; those after it count the quiet.
		time.Sleep(giveBackEvery + giveBackQuiet)
		synctest.Wait()
		if gave() != before || drops.Load() != int32(before) {
			t.Fatalf("gave back before %v of quiet looks (%d drops):\n%s", giveBackQuiet, drops.Load(), logged.String())
		}
		time.Sleep(giveBackEvery)
		synctest.Wait()
		if gave() == before {
			t.Fatalf("the burst's pages not given back after %v of quiet looks", giveBackQuiet+giveBackEvery)
		}
		if int(drops.Load()) != gave() {
			t.Errorf("%d give-backs let go of what the daemon can rebuild %d times", gave(), drops.Load())
		}
		if after := readHeap(buf).pages; after+32<<20 > held {
			t.Errorf("heap pages %d MiB after the give-back, %d MiB before: the burst's not returned", after>>20, held>>20)
		}
		if runtime.GOOS == "linux" && !strings.Contains(logged.String(), "the executable's pages let go") {
			t.Errorf("the give-back kept the executable's pages (codepages.Drop):\n%s", logged.String())
		}
		cancel()
		<-done
	})
}
