package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// noRespGrace is how long a hub answers "no responders" in a row before
// it is news: a leaf link just made does until its route to the hub's
// JetStream is known, which took up to 300 ms in the tests here.
const noRespGrace = 2 * time.Second

// RunSessions runs session until ctx ends. A session runs until it fails
// (the hub unreachable, a stale position); the next one starts after a
// pause that doubles up to five seconds and starts over once a session made
// progress (moved the counter). The first failure (once a minute for one
// cause), every twentieth and one whose error differs from the failure
// logged before are logged (but
// "no responders" only once it lasted noRespGrace), so a long
// outage cannot flood the log and a new cause is not hidden behind an old
// one. When a session is up again (Link.Up) after failures, that is
// logged too, with how long it was down, so an outage in the log has an
// end. The forwarder, the downloader, the replicator, the projection and
// the search index run so.
func RunSessions(ctx context.Context, l *Link, progress *atomic.Int64, session func(context.Context) error) {
	const first, most = 100 * time.Millisecond, 5 * time.Second
	backoff, failures, last := first, 0, ""
	var logged time.Time      // when a failure was last logged
	var noRespSince time.Time // since when the failures in a row were "no responders"
	for {
		before := progress.Load()
		err := session(ctx)
		if ctx.Err() != nil {
			return
		}
		l.down()
		if progress.Load() > before {
			backoff, failures = first, 0
		}
		failures++
		noResp := errors.Is(err, nats.ErrNoResponders)
		switch {
		case !noResp:
			noRespSince = time.Time{}
		case failures == 1 || noRespSince.IsZero():
			noRespSince = time.Now()
		}
		switch why := fmt.Sprint(err); {
		case noResp && time.Since(noRespSince) < noRespGrace:
			// A leaf link just made answers so until its route to the
			// hub's JetStream is known, a moment later: at a start, or
			// when the link is made again.
			l.logger.Debug(l.what+" not yet possible; retrying", "err", err, "retry_in", backoff)
		case why != last || failures%20 == 0 || failures == 1 && time.Since(logged) >= time.Minute:
			// A session that makes progress and then fails starts its
			// count again each time: its first failure is logged once a
			// minute, not at every one (a forwarder whose lines the hub
			// dropped as duplicates wrote a warning every 100 ms).
			l.logger.Warn(l.what+" paused; retrying", "err", err, "attempt", failures, "retry_in", backoff)
			l.announced.Store(true)
			last, logged = why, time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, most)
	}
}

// Link is whether a worker's session (with the hub, with its stream) is
// up. The session says so (Up) once it is; RunSessions, when it failed.
type Link struct {
	logger *slog.Logger
	what   string // the work, as the log names it: "forwarding to the hub"

	connected atomic.Bool
	ever      atomic.Bool  // the link was up once
	failures  atomic.Int64 // sessions failed since the link was last up
	downSince atomic.Int64 // when the first of them failed, Unix nanoseconds
	// announced: a failure since then was logged. Only such an outage's
	// end is: sessions that come up and fail again and again, with the
	// same cause, log as rarely as their failures do.
	announced atomic.Bool
}

// NewLink returns a link that is down, for the work named what in the
// log ("forwarding to the hub").
func NewLink(logger *slog.Logger, what string) *Link {
	return &Link{logger: logger, what: what}
}

// Load reports whether the link is up.
func (l *Link) Load() bool { return l.connected.Load() }

// Ever reports whether the link was up once since the daemon started.
func (l *Link) Ever() bool { return l.ever.Load() }

// Up marks the link up, and logs that it works again when a failure
// since it was last up was logged. It is cheap to call again while up.
func (l *Link) Up() {
	if l.connected.Swap(true) {
		return
	}
	l.ever.Store(true)
	if n := l.failures.Swap(0); l.announced.Swap(false) {
		l.logger.Info(l.what+" works again", "failed_attempts", n,
			"down_for", time.Since(time.Unix(0, l.downSince.Load())).Round(time.Millisecond))
	}
}

// down marks the link down after a failed session.
func (l *Link) down() {
	l.connected.Store(false)
	if l.failures.Add(1) == 1 {
		l.downSince.Store(time.Now().UnixNano())
	}
}
