package main

import (
	"context"
	"log/slog"
)

// minLevel raises a handler's threshold. The embedded server's notices
// (start-up banner, config dump) are debug detail for a daemon; its
// warnings and errors still come through.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// natsLogger is the embedded server's logger: warnings and up, unless the
// daemon itself logs at debug level.
func natsLogger(l *slog.Logger) *slog.Logger {
	l = l.With("component", "nats")
	if l.Enabled(context.Background(), slog.LevelDebug) {
		return l
	}
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}
