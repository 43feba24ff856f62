package main

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// Daemons of one process share the runtime's target: it stays at the
// start's value while any of them starts, and the last to finish puts
// back what was there before the first.
func TestHoldStartGC(t *testing.T) {
	t.Setenv("GOGC", "") // unset for holdStartGC
	before := debug.SetGCPercent(150)
	defer debug.SetGCPercent(before)

	a, b := holdStartGC(), holdStartGC()
	if got := gcPercent(); got != startGCPercent {
		t.Fatalf("two starting: GC percent %d, want %d", got, startGCPercent)
	}
	a()
	a() // a second release of the same hold is a no-op
	if got := gcPercent(); got != startGCPercent {
		t.Fatalf("one still starting: GC percent %d, want %d", got, startGCPercent)
	}
	b()
	if got := gcPercent(); got != 150 {
		t.Fatalf("none starting: GC percent %d, want the 150 from before", got)
	}
}

// A GOGC the user set is theirs: a start does not change it.
func TestHoldStartGCLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "200")
	before := debug.SetGCPercent(200)
	defer debug.SetGCPercent(before)
	release := holdStartGC()
	if got := gcPercent(); got != 200 {
		t.Fatalf("GOGC=200 set: GC percent %d during a start", got)
	}
	release()
	if got := gcPercent(); got != 200 {
		t.Fatalf("GOGC=200 set: GC percent %d after a start", got)
	}
}
