package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/pisyncd/pisyncd/config"
)

// PISYNC_MEMORY_BUDGET bounds the daemon's peak resident set. Its
// config.MemoryReserve (256 MiB) is taken off the top for what the work's
// shares do not size; the rest, config.WorkMemory, is split below: a
// quarter for the tailer's lines, a quarter for the bodies kept for
// repeated context queries, an eighth read ahead by a query, an eighth for
// the search index's batch, the rest (a quarter) for the embedded server's
// copies of what it stores. The Go soft limit is
// the work share plus memoryBase, the budget less 160 MiB.

// memoryBase is the part of the reserve below the Go soft limit: the room
// the runtime, the embedded nats-server's structures and buffers (its
// pools of 8 MiB block buffers, the blocks it caches for the streams it
// writes and reads), the consumers' pulls (8 MiB each) and the collector
// need besides the work share. With less (64 MiB was tried) the heap of an
// ingest of huge lines sits at the limit, the collector runs without
// pause, and the server, whose caches of blocks go at every collection,
// reads back the block it is writing again and again: 210 MB of base64
// images took 26 s instead of 11 s (docs/PERFORMANCE.md, Memory). The
// rest of the reserve, 160 MiB, is what the resident set holds above the
// soft limit: the binary, and what a soft limit cannot hold back.
const memoryBase = 96 << 20

// setMemoryLimit makes the Go runtime collect before the daemon's memory
// passes the work share plus memoryBase (a soft limit: the runtime
// collects more often as it nears it, and lets the heap grow past it
// rather than spend more than half the CPU collecting). Without it the
// heap grows to twice what is live before each collection, and the
// server's caches of blocks, held weakly, last until one. GOMEMLIMIT in
// the environment wins: the runtime has read it already. It returns the
// limit in force.
func setMemoryLimit(budget int64, logger *slog.Logger) int64 {
	b := config.BudgetOrDefault(config.ByteSize(budget))
	if os.Getenv("GOMEMLIMIT") != "" {
		limit := debug.SetMemoryLimit(-1)
		logger.Info("memory budget", "budget", b, "goLimit", config.ByteSize(limit), "goLimitFrom", "GOMEMLIMIT")
		return limit
	}
	limit := workMemory(budget) + memoryBase
	debug.SetMemoryLimit(limit)
	logger.Info("memory budget", "budget", b, "goLimit", config.ByteSize(limit))
	return limit
}

// workMemory is what PISYNC_MEMORY_BUDGET (its default when 0) leaves the
// work once the reserve is taken off.
func workMemory(budget int64) int64 { return config.WorkMemory(config.ByteSize(budget)) }

// tailerBudget is the bytes of lines the tailer holds at once: a quarter
// of the work share, at least PISYNC_MAX_LINE (config.Validate), so that
// no line published is held beyond it. The embedded server holds up to
// two more copies of what is being stored (its inbound queue and the
// staged batch) before the block it writes; the rest of the share is for
// those.
func tailerBudget(budget int64) int64 { return workMemory(budget) / 4 }

// projectionBudget is what the projection holds of message bodies: a
// quarter of the work share for the bodies kept for repeated context
// queries, an eighth read ahead by one (64 and 32 MiB by default): a query
// copies each body two or three times more on its way out.
func projectionBudget(budget int64) (bodies, readAhead int64) {
	w := workMemory(budget)
	return w / 4, w / 8
}

// firstReadOverlap is how much of the tailer's first read the projection
// applies while the tailer is still reading (projection.Options.
// WriteAfterBytes): an eighth of the work share (32 MiB by default), all of
// thousands of small sessions (a large session stops it at once). It is
// the search index's eighth: the index starts once the projection has
// caught up with the first read (firstReadProjected).
func firstReadOverlap(budget int64) int64 { return workMemory(budget) / 8 }

// searchBatch is the bytes of text the search index takes in one batch
// (search.Options.BatchBytes). The index's share is an eighth of the work
// share (32 MiB by default): bleve holds about 35 times a batch's text
// while it analyses it and builds its segment (every word's positions;
// 36.7 MB in use at the peak of a build of 1 MiB batches), so the batch is
// a 40th of the share (819 KiB by default). The pages of the index's
// segment files that its trimmer leaves mapped are measured with the
// reserve (docs/PERFORMANCE.md, "Search").
func searchBatch(budget int64) int { return int(max(workMemory(budget)/8/40, 64<<10)) }
