package search

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/internal/metrics"
)

// Collectors returns the worker's and its index's Prometheus metrics.
func (w *Worker) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Counter("search_docs_indexed_total", "Entries written to the search index.", w.indexed.Load),
		metrics.Counter("search_lines_skipped_total", "Lines with nothing to search (settings changes, malformed lines).", w.skipped.Load),
		metrics.Counter("search_sessions_erased_total", "Sessions removed from the search index on an erase event.", w.erased.Load),
		metrics.Gauge("search_lag_messages", "Stream messages the search indexer has still to read or write (the lag status shows).", w.unwritten),
		metrics.Gauge("search_docs", "Entries in the search index.", func() int64 {
			n, _ := w.ix.DocCount()
			return int64(n)
		}),
		metrics.Gauge("search_index_bytes", "Size of the search index's files.", w.ix.DiskBytes),
		metrics.Counter("search_trims_total", "Times the pages of the index's mapped segment files were dropped from the resident set (while the index is read, and once after).", w.ix.trim.trims.Load),
		metrics.Counter("search_merges_total", "Rounds of scorch's merger over the index's segments.", w.ix.trim.merges.Load),
	}
}
