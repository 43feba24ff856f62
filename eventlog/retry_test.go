package eventlog

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestRunSessionsLogsNewCauses: a failure that repeats is logged once (and
// every twentieth time); one with another cause is logged at once, even
// in the middle of an outage.
func TestRunSessionsLogsNewCauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := []string{"hub unreachable", "hub unreachable", "hub unreachable", "consumer gone", "consumer gone", "hub unreachable"}
		for range 20 {
			causes = append(causes, "hub unreachable")
		}
		var logged []string
		var mu sync.Mutex
		logger := slog.New(recordHandler(func(r slog.Record) {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "err" {
					mu.Lock()
					logged = append(logged, a.Value.String())
					mu.Unlock()
				}
				return true
			})
		}))
		ctx, cancel := context.WithCancel(t.Context())
		var progress atomic.Int64
		var connected atomic.Bool
		i := 0
		runSessions(ctx, logger, "paused", &progress, &connected, func(context.Context) error {
			if i == len(causes) {
				cancel()
				return ctx.Err()
			}
			i++
			return errors.New(causes[i-1])
		})
		// Failures 1 (the first), 4 and 6 (new causes), 20 (the
		// twentieth); not 2, 3, 5 or the rest.
		want := "hub unreachable | consumer gone | hub unreachable | hub unreachable"
		if got := strings.Join(logged, " | "); got != want {
			t.Fatalf("logged %q, want %q", got, want)
		}
	})
}

// recordHandler is a slog.Handler that hands every record to f.
type recordHandler func(slog.Record)

func (h recordHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error { h(r); return nil }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h recordHandler) WithGroup(string) slog.Handler                 { return h }
