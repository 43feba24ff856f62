package eventlog

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// runSessions runs session until ctx ends. A session runs until it fails
// (the hub unreachable, a stale position); the next one starts after a
// pause that doubles up to five seconds and starts over once a session made
// progress (moved the counter). The first failure, every twentieth and
// one whose error differs from the failure before are logged, so a long
// outage cannot flood the log and a new cause is not hidden behind an old
// one.
func runSessions(ctx context.Context, logger *slog.Logger, msg string, progress *atomic.Int64, connected *atomic.Bool, session func(context.Context) error) {
	const first, most = 100 * time.Millisecond, 5 * time.Second
	backoff, failures, last := first, 0, ""
	for {
		before := progress.Load()
		err := session(ctx)
		if ctx.Err() != nil {
			return
		}
		connected.Store(false)
		if progress.Load() > before {
			backoff, failures = first, 0
		}
		failures++
		if why := fmt.Sprint(err); failures == 1 || failures%20 == 0 || why != last {
			logger.Warn(msg, "err", err, "attempt", failures, "retry_in", backoff)
			last = why
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, most)
	}
}
