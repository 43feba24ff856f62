package admit

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/internal/metrics"
)

// Collectors returns the admission point's Prometheus metrics, read from
// the counters Stats reports.
func (g *Gate) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Counter("admission_admitted_total", "Events of other machines admitted into PI_ALL.", g.admitted.Load),
		metrics.Counter("admission_rejected_total", "Events of other machines rejected at admission (status lists them by origin and reason).", g.rejected.Load),
	}
}
