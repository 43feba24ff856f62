package config

import "fmt"

// DefaultMemoryBudget is PISYNC_MEMORY_BUDGET when it is 0: a work share
// (WorkMemory) of 256 MiB, whose quarter for the tailer's lines is the
// default PISYNC_MAX_LINE, 64 MiB.
const DefaultMemoryBudget = 512 << 20

// MemoryReserve is the part of PISYNC_MEMORY_BUDGET that the daemon's
// work does not size, because it is not the work's to hold back: what the
// resident set was measured to hold beyond the work's shares at its peaks
// (docs/PERFORMANCE.md, The whole daemon): about 25 MB of binary and
// runtime; the 96 MiB the Go soft memory limit leaves above the work share
// (cmd/pisyncd's memoryBase: with less the collector runs without pause on
// an ingest of huge lines, and the server, whose block caches go at each
// collection, reads back the block it writes); and what a soft limit
// cannot hold back, 130–160 MB: the embedded server's 8 MiB block buffers
// (one for each block written or loaded, recycled through pools that
// collections empty only over two cycles) and, on a busy machine, the
// copies made on the way to and from the store while the collector, held
// to half the CPU, falls behind.
const MemoryReserve = 256 << 20

// WorkMemory is what PISYNC_MEMORY_BUDGET (the default when 0) leaves the
// daemon's work once MemoryReserve is taken off: a quarter of it for the
// lines the tailer holds, a quarter for the bodies kept for repeated
// context queries, an eighth for a query's read-ahead, an eighth for the
// search index's batch, the rest for the server's copies of what it
// stores. Validate keeps it at least four
// times PISYNC_MAX_LINE; the floor of 1 MiB is for a Config never
// validated.
func WorkMemory(budget ByteSize) int64 {
	return max(int64(BudgetOrDefault(budget))-MemoryReserve, 1<<20)
}

// BudgetOrDefault is PISYNC_MEMORY_BUDGET as it applies: the default when
// 0 (a Config literal, or the variable set to 0).
func BudgetOrDefault(budget ByteSize) ByteSize {
	if budget <= 0 {
		return DefaultMemoryBudget
	}
	return budget
}

// checkMemoryBudget: the budget holds its reserve and a work share whose
// quarter, the tailer's, fits the longest line published, so that no line
// is held beyond the tailer's share and the daemon's peak stays within
// the budget.
func (c *Config) checkMemoryBudget() error {
	budget, what := BudgetOrDefault(c.MemoryBudget), ""
	if c.MemoryBudget <= 0 {
		what = " (the default)"
	}
	need := MemoryReserve + 4*int64(c.MaxLine)
	if int64(budget) >= need {
		return nil
	}
	fix := fmt.Sprintf("raise %s_MEMORY_BUDGET to %v or more", Prefix, ByteSize(need))
	if room := (int64(budget) - MemoryReserve) / 4 &^ (1<<10 - 1); room >= 1<<10 {
		fix += fmt.Sprintf(", or lower %s_MAX_LINE to %v or less", Prefix, ByteSize(room))
	}
	return fmt.Errorf("%s_MEMORY_BUDGET %v%s: want at least %v, its reserve of %v plus 4 × %s_MAX_LINE (%v), so that the longest line published fits the tailer's quarter of the rest: %s",
		Prefix, budget, what, ByteSize(need), ByteSize(MemoryReserve), Prefix, c.MaxLine, fix)
}
