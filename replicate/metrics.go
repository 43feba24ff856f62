package replicate

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/internal/metrics"
)

// Collectors returns the replicator's Prometheus metrics, read from the
// counters Stats reports.
func (r *Replicator) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Counter("replica_files_created_total", "Session files of other machines created here.", r.filesCreated.Load),
		metrics.Counter("replica_lines_written_total", "Lines of other machines appended to files here.", r.linesWritten.Load),
		metrics.Gauge("replica_lines_waiting", "Lines waiting for their parent, their header or an idle file.", r.waiting.Load),
		metrics.Counter("replica_deferred_total", "Write rounds put off because a local pi was writing the file.", r.deferred.Load),
		metrics.Counter("replica_rejected_total", "Remote lines not written because their session cannot be written safely here (quarantined).", r.rejected.Load),
		metrics.Counter("replica_refused_lines_total", "Remote lines not written because they would break the file for pi (an id held by another line, a parentId cycle).", r.refused.Load),
		metrics.Counter("replica_untrusted_lines_total", "Lines of untrusted nodes on sessions they did not begin, kept in the event log and not written here (PISYNC_TRUSTED_NODES).", r.untrusted.Load),
		metrics.Counter("replica_trashed_total", "Copies moved to the trash after a deletion elsewhere.", r.trashed.Load),
		metrics.Counter("replica_restored_total", "Sessions brought back after a restore elsewhere.", r.restored.Load),
		metrics.Counter("replica_sessions_erased_total", "Sessions erased here because another machine erased them.", r.erasedRemote.Load),
		metrics.Counter("replica_erased_session_lines_total", "Lines of sessions erased here, written after the erase by a machine that kept the session: not written here.", r.erasedLines.Load),
		metrics.Counter("replica_entry_collisions_total", "Entry ids two machines used for different lines.", r.collisions.Load),
		metrics.Gauge("replica_forked_sessions", "Sessions continued from the same entry on two machines.", func() int64 { return r.Stats().ForkedSessions }),
	}
}
