package testenv

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// LogLines is a logger whose records a test reads back as lines,
// "LEVEL message key=value ...", leaving out the attributes named in skip
// (a pause's length, say, where only the rest is the test's business).
// Safe for concurrent use.
type LogLines struct {
	mu    sync.Mutex
	lines []string
	skip  []string
}

// NewLogLines returns an empty LogLines and the logger that fills it.
func NewLogLines(skip ...string) (*LogLines, *slog.Logger) {
	l := &LogLines{skip: skip}
	return l, slog.New(linesHandler{l})
}

// Lines returns the lines logged so far.
func (l *LogLines) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

type linesHandler struct{ l *LogLines }

func (h linesHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h linesHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h linesHandler) WithGroup(string) slog.Handler            { return h }

func (h linesHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if !slices.Contains(h.l.skip, a.Key) {
			line += " " + a.String()
		}
		return true
	})
	h.l.mu.Lock()
	h.l.lines = append(h.l.lines, line)
	h.l.mu.Unlock()
	return nil
}
