package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/metrics"
)

// A full disk under the state dir stops the event store (JetStream keeps
// the write error until the stream is loaded again); the store watch
// reports it at once, holds publishing back, and restarts the embedded
// server once the disk takes writes again; the daemon's connection
// follows it to the new one. What the tailer read from the failing store
// is then read again, before anything is published.
// (A full disk under the sessions dir only stops the replicator's writes,
// which retry on their own; pi cannot write there either.)

// reloadWait bounds the wait for the tailer's workers to pause before a
// restart of the event store, and to confirm a reload after it. A worker
// stuck in one file (a slow disk) must not keep the store from every
// other file: it pauses or forgets at its next step anyway.
const reloadWait = 5 * time.Second

func (d *Daemon) watchStore() error {
	w, err := d.srv.WatchStore(embedded.StoreWatchOptions{
		Logger: d.logger.With("component", "store"),
		// The tailer's workers wait between two steps while the server
		// restarts, so that none waits out a request the old server took
		// down with it (Reload would wait for that worker).
		Pause: func(ctx context.Context) func() {
			pctx, cancel := context.WithTimeout(ctx, reloadWait)
			defer cancel()
			resume, err := d.tailer.Pause(pctx)
			if err != nil && ctx.Err() == nil {
				d.logger.Warn("a tailer worker did not pause in time for the restart of the event store; it pauses at its next step", "err", err)
			}
			return resume
		},
		Recovered: func(ctx context.Context) error {
			rctx, cancel := context.WithTimeout(ctx, reloadWait)
			defer cancel()
			if err := d.tailer.Reload(rctx); err != nil && ctx.Err() == nil {
				d.logger.Warn("a tailer worker did not confirm the reload in time; it forgets what it read at its next step", "err", err)
			}
			return ctx.Err()
		},
		Resumed: d.tailer.RetryNow,
	})
	if err != nil {
		return err
	}
	d.store = w
	d.log.SetWritable(w.Writable)
	d.log.SetSuspect(w.Suspect)
	if d.all != nil {
		d.all.SetSuspect(w.Suspect)
	}
	return nil
}

// diskFull reports whether err comes from a full disk. The server's API
// errors carry the cause as text only.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left on device")
}

// openDaemonWaiting opens the daemon, and while the state dir's disk is too
// full for the store to start (creating or updating a stream writes its
// metadata), says so once and tries again with a growing pause until it
// starts or ctx ends (then it returns nil, nil: asked to stop): a daemon
// restarted on a full disk (after a crash, at boot) comes up by itself once
// space is freed.
//
// The sessions dir's lock is held throughout: a second daemon started
// meanwhile (status said nothing runs) is refused at once, as it is once
// this one runs.
func openDaemonWaiting(ctx context.Context, cfg *config.Config, logger *slog.Logger) (_ *Daemon, err error) {
	const first, most = 500 * time.Millisecond, 10 * time.Second
	rootLock, err := lockSessionsDir(cfg, logger)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && rootLock != nil {
			rootLock.Close()
		}
	}()
	pause := first
	var since time.Time
	for {
		d, err := openDaemonLocked(ctx, cfg, logger, rootLock)
		if err == nil {
			if !since.IsZero() {
				logger.Info("the state dir's disk takes writes again; starting", "waited", time.Since(since).Round(time.Millisecond))
			}
			return d, nil
		}
		if !diskFull(err) || ctx.Err() != nil {
			return nil, err
		}
		if since.IsZero() {
			since = time.Now()
			logger.Error("the state dir's disk is full; pisyncd starts once it takes writes again", "err", err, "state_dir", cfg.StateDir)
		}
		select {
		case <-ctx.Done():
			if rootLock != nil {
				rootLock.Close()
			}
			return nil, nil
		case <-time.After(pause):
		}
		pause = min(pause*2, most)
	}
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
