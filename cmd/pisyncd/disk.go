package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/metrics"
)

// A full disk under the state dir stops the event store (JetStream keeps
// the write error until the stream is loaded again); the store watch
// reports it at once, holds publishing back, and restarts JetStream in
// place once the disk takes writes again. What the tailer read from the
// failing store is then read again, before anything is published.
// (A full disk under the sessions dir only stops the replicator's writes,
// which retry on their own; pi cannot write there either.)

// reloadTimeout bounds the tailer's reload after a recovery; past it the
// watch tries the whole recovery again.
const reloadTimeout = time.Minute

func (d *Daemon) watchStore() error {
	w, err := d.srv.WatchStore(embedded.StoreWatchOptions{
		Logger: d.logger.With("component", "store"),
		Recovered: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
			defer cancel()
			return d.tailer.Reload(ctx)
		},
		Resumed: d.tailer.RetryNow,
	})
	if err != nil {
		return err
	}
	d.store = w
	d.log.SetWritable(w.Writable)
	return nil
}

// freeBytes is what dir's file system has left for an unprivileged user,
// -1 when it cannot be told.
func freeBytes(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// diskCollectors report the free space of the sessions dir; the state
// dir's is the store watch's.
func diskCollectors(cfg *config.Config) []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Gauge("sessions_dir_free_bytes", "Bytes left on the file system of the sessions dir.", func() int64 { return freeBytes(cfg.SessionsDir) }),
	}
}
