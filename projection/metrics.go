package projection

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/internal/metrics"
)

// Collectors returns the projection worker's Prometheus metrics.
func (w *Worker) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Counter("projection_events_applied_total", "Events applied to the views.", w.applied.Load),
		metrics.Counter("projection_events_skipped_total", "Events already in the views (redelivered or replayed).", w.skipped.Load),
		metrics.Counter("projection_tree_rebuilds_total", "Session trees rebuilt from the streams.", w.rebuilds.Load),
		metrics.Counter("projection_kv_writes_total", "Values written to the views bucket.", w.writes.Load),
		metrics.Counter("projection_sessions_erased_total", "Sessions dropped from the views on an erase event.", w.erased.Load),
		metrics.Gauge("projection_sessions", "Sessions in the catalog.", func() int64 { return int64(w.Stats().Sessions) }),
	}
}
