package replicate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestRetryRunsLogs: failures are logged the first time, every twentieth
// and when their cause changes, not each; a run that works after logged
// failures says so once, with their count and how long it took.
func TestRetryRunsLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs, logger := testenv.NewLogLines("retry_in")
		ctx, cancel := context.WithCancel(t.Context())
		// Works, then fails; fails 21 times more (the store down);
		// works, fails with another cause; works.
		type step struct {
			up  bool
			err string
		}
		script := []step{{true, "store down"}}
		for range 21 {
			script = append(script, step{false, "store down"})
		}
		script = append(script, step{true, "consumer gone"}, step{true, ""})
		retryRuns(ctx, logger, func(_ context.Context, up func()) error {
			s := script[0]
			script = script[1:]
			if s.up {
				up()
				up()
			}
			if len(script) == 0 {
				cancel()
				return ctx.Err()
			}
			return errors.New(s.err)
		})
		// The pauses double from 100 ms to 5 s (no run lasted a
		// minute): 22 failures before the second run that works,
		// 0.1+0.2+0.4+0.8+1.6+3.2 s and 16 × 5 s.
		want := []string{
			"WARN replication paused; retrying err=store down attempt=1",
			"WARN replication paused; retrying err=store down attempt=20",
			"INFO replication works again failed_attempts=22 down_for=1m26.3s",
			"WARN replication paused; retrying err=consumer gone attempt=1",
			"INFO replication works again failed_attempts=1 down_for=5s",
		}
		if got := strings.Join(logs.Lines(), "\n"); got != strings.Join(want, "\n") {
			t.Errorf("logged\n%s\nwant\n%s", got, strings.Join(want, "\n"))
		}
	})
}
