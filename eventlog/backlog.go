package eventlog

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// backlog reports a long catch-up (after a reconnect, or a first start
// with history to copy): every `every` while the consumer says messages
// are still pending, and once when it has caught up. A short catch-up,
// the normal case, logs nothing.
type backlog struct {
	logger *slog.Logger
	msg    string
	every  time.Duration

	start, last time.Time
	lines       int64
	reported    bool
}

func newBacklog(logger *slog.Logger, msg string) *backlog {
	return &backlog{logger: logger, msg: msg, every: 5 * time.Second}
}

// update records n lines handled, with pending still waiting after them.
func (b *backlog) update(n int, pending uint64, now time.Time) {
	if b.start.IsZero() {
		b.start, b.last = now, now
	}
	b.lines += int64(n)
	if pending == 0 {
		if b.reported {
			b.logger.Info(b.msg+": caught up", "lines", b.lines, "took", now.Sub(b.start).Round(time.Millisecond))
		}
		b.start, b.lines, b.reported = time.Time{}, 0, false
		return
	}
	if now.Sub(b.last) >= b.every {
		b.last, b.reported = now, true
		b.logger.Info(b.msg, "lines", b.lines, "pending", pending, "elapsed", now.Sub(b.start).Round(time.Second))
	}
}

// numPending is how many messages the consumer had left after m.
func numPending(m jetstream.Msg) uint64 {
	meta, err := m.Metadata()
	if err != nil {
		return 0
	}
	return meta.NumPending
}
