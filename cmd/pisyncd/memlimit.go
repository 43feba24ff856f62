package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/pisyncd/pisyncd/watch"
)

// memoryBase is what the daemon's Go memory holds besides what
// PISYNC_MEMORY_BUDGET sizes: the runtime, the embedded nats-server's
// structures and buffers (its pools of 8 MiB block buffers, the blocks
// it caches for the streams it writes and reads), the consumers' pulls
// (8 MiB each) and the room the collector needs to work. With less (64
// MiB was tried) the heap of an ingest of huge lines sits at the limit,
// the collector runs without pause, and the server, whose caches of
// blocks go at every collection, reads back the block it is writing again
// and again: 210 MB of base64 images took 26 s instead of 11 s
// (docs/PERFORMANCE.md, Memory).
const memoryBase = 96 << 20

// setMemoryLimit makes the Go runtime collect before the daemon's memory
// passes its budget plus memoryBase (a soft limit: the runtime collects
// more often as it nears it, and lets the heap grow past it rather than
// spend more than half the CPU collecting). Without it the heap grows to
// twice what is live before each collection, and the server's caches of
// blocks, held weakly, last until one. GOMEMLIMIT in the environment
// wins: the runtime has read it already. It returns the limit in force.
func setMemoryLimit(budget int64, logger *slog.Logger) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		limit := debug.SetMemoryLimit(-1)
		logger.Info("memory limit from GOMEMLIMIT", "bytes", limit)
		return limit
	}
	limit := memoryBudget(budget) + memoryBase
	debug.SetMemoryLimit(limit)
	logger.Debug("memory limit from PISYNC_MEMORY_BUDGET", "bytes", limit)
	return limit
}

// memoryBudget is PISYNC_MEMORY_BUDGET, its default when 0.
func memoryBudget(budget int64) int64 {
	if budget <= 0 {
		return watch.DefaultMemoryBudget
	}
	return budget
}

// tailerBudget is the bytes of lines the tailer holds at once: a quarter
// of the budget. The embedded server holds up to two more copies of what
// is being stored (its inbound queue and the staged batch) before the
// block it writes; the rest of the budget is for those.
func tailerBudget(budget int64) int64 { return memoryBudget(budget) / 4 }

// projectionBudget is what the projection holds of message bodies: a
// quarter of the budget for the bodies kept for repeated context queries,
// an eighth read ahead by one (32 and 16 MiB by default): a query copies
// each body two or three times more on its way out.
func projectionBudget(budget int64) (bodies, readAhead int64) {
	budget = memoryBudget(budget)
	return budget / 4, budget / 8
}
