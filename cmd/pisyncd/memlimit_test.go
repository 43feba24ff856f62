package main

import (
	"log/slog"
	"runtime/debug"
	"testing"
)

// TestMemoryLimit: the run command sets the Go soft memory limit to the
// budget less its reserve plus memoryBase (the default budget when it is
// 0), splits the work share between the tailer and the projection, and
// leaves a limit from GOMEMLIMIT alone.
func TestMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOMEMLIMIT", "")
	if got := setMemoryLimit(320<<20, log); got != 160<<20 || debug.SetMemoryLimit(-1) != got {
		t.Errorf("budget 320 MiB: limit %d, in force %d; want 160 MiB", got, debug.SetMemoryLimit(-1))
	}
	if got := setMemoryLimit(0, log); got != 352<<20 {
		t.Errorf("budget 0 (the default): limit %d, want 352 MiB", got)
	}
	bodies, readAhead := projectionBudget(0)
	if tb := tailerBudget(0); tb != 64<<20 || bodies != 64<<20 || readAhead != 32<<20 {
		t.Errorf("shares of the default budget: tailer %d, bodies %d, read-ahead %d", tb, bodies, readAhead)
	}
	if tb := tailerBudget(320 << 20); tb != 16<<20 {
		t.Errorf("tailer's share of 320 MiB: %d, want 16 MiB", tb)
	}
	// The search index's batch: a 40th of its eighth of the work share.
	if b := searchBatch(0); b != 256<<20/8/40 {
		t.Errorf("search batch of the default budget: %d, want %d", b, 256<<20/8/40)
	}
	if b := searchBatch(256<<20 + 1<<20); b != 64<<10 {
		t.Errorf("search batch of a 257 MiB budget: %d, want its floor 64 KiB", b)
	}

	// What GOMEMLIMIT set (the runtime reads it at start) stays.
	debug.SetMemoryLimit(300 << 20)
	t.Setenv("GOMEMLIMIT", "300MiB")
	if got := setMemoryLimit(512<<20, log); got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Errorf("with GOMEMLIMIT: limit %d, want 300 MiB", got)
	}
}
