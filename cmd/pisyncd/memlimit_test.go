package main

import (
	"log/slog"
	"runtime/debug"
	"testing"
)

// TestMemoryLimit: the run command sets the Go soft memory limit to the
// budget plus memoryBase (the default budget when it is 0), and leaves
// one from GOMEMLIMIT alone.
func TestMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOMEMLIMIT", "")
	if got := setMemoryLimit(64<<20, log); got != 64<<20+memoryBase || debug.SetMemoryLimit(-1) != got {
		t.Errorf("budget 64 MiB: limit %d, in force %d; want %d", got, debug.SetMemoryLimit(-1), 64<<20+memoryBase)
	}
	if got := setMemoryLimit(0, log); got != 128<<20+memoryBase {
		t.Errorf("budget 0 (the default): limit %d, want %d", got, 128<<20+memoryBase)
	}
	bodies, readAhead := projectionBudget(0)
	if tb := tailerBudget(0); tb != 32<<20 || bodies != 32<<20 || readAhead != 16<<20 {
		t.Errorf("shares of the default budget: tailer %d, bodies %d, read-ahead %d", tb, bodies, readAhead)
	}

	// What GOMEMLIMIT set (the runtime reads it at start) stays.
	debug.SetMemoryLimit(300 << 20)
	t.Setenv("GOMEMLIMIT", "300MiB")
	if got := setMemoryLimit(64<<20, log); got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Errorf("with GOMEMLIMIT: limit %d, want 300 MiB", got)
	}
}
