package watch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/internal/metrics"
)

// Collectors returns the tailer's Prometheus metrics. The counters read the
// same atomics that Stats reports, so the two can never disagree.
func (t *Tailer) Collectors() []prometheus.Collector {
	counter, gauge := metrics.Counter, metrics.Gauge
	out := []prometheus.Collector{
		counter("lines_published_total", "Session lines published to PI_LOCAL.", t.published.Load),
		counter("lines_malformed_total", "Lines skipped: malformed, non-object, over the size limit, or with an id, parentId and type too long to carry.", t.malformed.Load),
		counter("entry_collisions_total", "Entry ids held by two different lines of one session.", t.collisions.Load),
		counter("publish_errors_total", "Failed publish attempts (retried).", t.publishErrors.Load),
		counter("files_deleted_total", "Session files that disappeared.", t.deleted.Load),
		counter("rescans_total", "Rescans of the sessions tree (every 6th stats every session file; the others pass over settled files in watched folders).", t.rescans.Load),
		gauge("files_tracked", "Files under the sessions dir being followed.", t.filesTracked.Load),
		gauge("files_ignored", "Files that are not pi sessions.", t.filesIgnored.Load),
		gauge("sessions_tracked", "Sessions with at least one followed file.", func() int64 { return t.Stats().Sessions }),
		counter("file_bytes_read_total", "Bytes read from session files.", t.bytesRead.Load),
		gauge("duplicate_paths", "Paths passed over because their file is followed under another path.", t.duplicatePaths.Load),
		gauge("unreadable_folders", "Folders under the sessions dir the last rescan could not read.", t.unreadableDirs.Load),
		gauge("sessions_dir_away", "1 while the sessions dir is gone, or holds none of the session files it held (unmounted, moved): nothing is followed, and no file is taken for deleted.", func() int64 {
			if t.away.Load() {
				return 1
			}
			return 0
		}),
		gauge("unwatched_folders", "Folders under the sessions dir the last rescan could not watch (an inotify limit): found by rescans only.", t.unwatchedDirs.Load),
		gauge("memory_held_bytes", "Bytes of lines the tailer holds now (bounded by memory_budget_bytes).", func() int64 { u, _, _ := t.mem.state(); return u }),
		gauge("memory_budget_bytes", "The most bytes of lines the tailer holds at once (in pisyncd a quarter of PISYNC_MEMORY_BUDGET less its reserve).", func() int64 { return t.mem.size }),
		counter("memory_waits_total", "Times a worker waited for room in the memory budget.", func() int64 { _, _, w := t.mem.state(); return w }),
		t.publishSeconds,
	}
	for r := range numIgnoreReasons {
		out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "pisyncd", Name: "files_ignored_by_reason", Help: "Files left alone, by reason.",
			ConstLabels: prometheus.Labels{"reason": r.String()},
		}, func() float64 { return float64(t.ignoredBy[r].Load()) }))
	}
	return out
}

func newPublishHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "pisyncd", Name: "publish_seconds",
		Help:    "Time to store one group of lines durably in PI_LOCAL.",
		Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, 1},
	})
}
