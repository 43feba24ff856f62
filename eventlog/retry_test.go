package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
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
		logger, logged := errsLogged(slog.LevelDebug)
		ctx, cancel := context.WithCancel(t.Context())
		var progress atomic.Int64
		i := 0
		RunSessions(ctx, NewLink(logger, "copying"), &progress, func(context.Context) error {
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
		if got := logged(); got != want {
			t.Fatalf("logged %q, want %q", got, want)
		}
	})
}

// TestRunSessionsPassesOverNoResponders: "no responders" (a leaf link
// just made, at almost every start) is no warning for its first
// noRespGrace in a row; past it, it is, once; after a session that made
// progress it is passed over again.
func TestRunSessionsPassesOverNoResponders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		noResp := fmt.Errorf("downloader: hub PI_HUB info: %w", nats.ErrNoResponders)
		logger, warned := errsLogged(slog.LevelWarn)
		ctx, cancel := context.WithCancel(t.Context())
		var progress atomic.Int64
		// Each session fails with err, having made progress first or
		// not. The pauses between them: 0.1, 0.2, 0.4, 0.8, 1.6 s...
		steps := []struct {
			err      error
			progress bool
		}{
			{noResp, false}, {noResp, false}, {noResp, false}, {noResp, false}, {noResp, false}, // at 0 to 1.5 s
			{noResp, false},                 // at 3.1 s: warned
			{noResp, false},                 // the same cause again: not
			{noResp, true}, {noResp, false}, // after progress, a new run within the grace
			{errors.New("hub unreachable"), true}, // another cause: warned
		}
		i := 0
		RunSessions(ctx, NewLink(logger, "copying"), &progress, func(context.Context) error {
			if i == len(steps) {
				cancel()
				return ctx.Err()
			}
			st := steps[i]
			i++
			if st.progress {
				progress.Add(1)
			}
			return st.err
		})
		want := noResp.Error() + " | hub unreachable"
		if got := warned(); got != want {
			t.Fatalf("warned %q,\nwant   %q", got, want)
		}
	})
}

// TestRunSessionsLogsRecovery: a session that comes up after a failure
// was logged says so once, with how many failed and for how long the link
// was down; a session marking itself up again while up says nothing more,
// and sessions that come up and fail again with the same cause log their
// ends as rarely as their failures.
func TestRunSessionsLogsRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var logged []string
		logger := slog.New(recordHandler(func(r slog.Record) {
			line := r.Level.String() + " " + r.Message
			r.Attrs(func(a slog.Attr) bool {
				if a.Key != "err" && a.Key != "retry_in" {
					line += " " + a.String()
				}
				return true
			})
			mu.Lock()
			logged = append(logged, line)
			mu.Unlock()
		}))
		ctx, cancel := context.WithCancel(t.Context())
		var progress atomic.Int64
		l := NewLink(logger, "forwarding to the hub")
		// Up at once, then fails; fails twice more; up, fails; fails;
		// up, fails; fails 14 times; up, fails.
		script := []bool{true, false, false, true, false, true}
		for range 14 {
			script = append(script, false)
		}
		script = append(script, true)
		RunSessions(ctx, l, &progress, func(context.Context) error {
			if len(script) == 0 {
				cancel()
				return ctx.Err()
			}
			up := script[0]
			script = script[1:]
			if up {
				l.Up()
				l.Up()
				if !l.Load() {
					t.Error("up, and Load says down")
				}
			}
			return errors.New("hub unreachable")
		})
		if l.Load() {
			t.Error("down, and Load says up")
		}
		// Every session fails with the same cause, so only the first
		// failure and the twentieth are logged, and the ends of those
		// two outages. The first up follows none. The pauses double from
		// 100 ms (no session made progress) to 5 s: up again after three
		// failures and 100+200+400 ms; after the sixth session's failure
		// 3.2 s and 14 pauses of 5 s.
		want := []string{
			"WARN forwarding to the hub paused; retrying attempt=1",
			"INFO forwarding to the hub works again failed_attempts=3 down_for=700ms",
			"WARN forwarding to the hub paused; retrying attempt=20",
			"INFO forwarding to the hub works again failed_attempts=15 down_for=1m13.2s",
		}
		if got := strings.Join(logged, "\n"); got != strings.Join(want, "\n") {
			t.Errorf("logged\n%s\nwant\n%s", got, strings.Join(want, "\n"))
		}
	})
}

// errsLogged returns a logger that keeps the err of each record at level
// or above, and what it kept so far, joined by " | ".
func errsLogged(level slog.Level) (*slog.Logger, func() string) {
	var errs []string
	var mu sync.Mutex
	logger := slog.New(recordHandler(func(r slog.Record) {
		if r.Level < level {
			return
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				mu.Lock()
				errs = append(errs, a.Value.String())
				mu.Unlock()
			}
			return true
		})
	}))
	return logger, func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(errs, " | ")
	}
}

// recordHandler is a slog.Handler that hands every record to f.
type recordHandler func(slog.Record)

func (h recordHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error { h(r); return nil }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h recordHandler) WithGroup(string) slog.Handler                 { return h }

// TestRunSessionsProgressThenFailure: sessions that each make progress and
// then fail with the same cause start their count again each time; their
// failure is logged once a minute, not each time (a forwarder whose lines
// a hub dropped as duplicates wrote a warning every 100 ms, 999 of them).
func TestRunSessionsProgressThenFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		warned := 0
		logger := slog.New(recordHandler(func(r slog.Record) {
			if r.Level == slog.LevelWarn {
				mu.Lock()
				warned++
				mu.Unlock()
			}
		}))
		ctx, cancel := context.WithCancel(t.Context())
		var progress atomic.Int64
		l := NewLink(logger, "forwarding to the hub")
		start, runs := time.Now(), 0
		RunSessions(ctx, l, &progress, func(context.Context) error {
			if runs++; time.Since(start) >= 150*time.Second {
				cancel()
				return ctx.Err()
			}
			progress.Add(1)
			return errors.New("wrong last subject sequence")
		})
		// 100 ms apart: 1,500 sessions in 150 s, three minutes begun.
		if runs < 1000 || warned != 3 {
			t.Errorf("%d sessions failed after progress, %d warnings; want 3, one a minute", runs, warned)
		}
	})
}
