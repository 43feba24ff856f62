package eventlog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestWatchLink: the forwarder's requests are given up on when the hub
// link changes or goes down, and not while it stays.
func TestWatchLink(t *testing.T) {
	for _, tc := range []struct {
		then string
		want error
	}{{"b", errLinkChanged}, {"", errLinkDown}} {
		synctest.Test(t, func(t *testing.T) {
			var name atomic.Value
			name.Store("a")
			ctx, stop := watchLink(t.Context(), func() string { return name.Load().(string) })
			defer stop()
			time.Sleep(10 * linkPoll)
			if ctx.Err() != nil {
				t.Fatalf("ended on a link that stayed: %v", context.Cause(ctx))
			}
			name.Store(tc.then)
			time.Sleep(linkPoll)
			synctest.Wait()
			if got := context.Cause(ctx); !errors.Is(got, tc.want) {
				t.Fatalf("link %q → %q: cause %v, want %v", "a", tc.then, got, tc.want)
			}
		})
	}
}

// TestSlept: a wait of linkPoll that took far longer on either clock
// spanned a stop of the process or a sleep of the machine; one that took
// about as long did not.
func TestSlept(t *testing.T) {
	began := time.Now()
	for _, c := range []struct {
		name string
		now  time.Time
		want bool
	}{
		{"a wait as long as asked", began.Add(linkPoll), false},
		{"a wait on a loaded machine", began.Add(linkPoll + wakeGap/2), false},
		{"the process stopped", began.Add(linkPoll + wakeGap + time.Second), true},
		// Without its monotonic reading, Sub compares wall clocks: a
		// suspend, which Linux's monotonic clock does not count.
		{"the machine suspended", began.Round(0).Add(2 * time.Minute), true},
		{"the wall clock set back", began.Round(0).Add(-time.Hour), false},
	} {
		if got := slept(began, c.now); got != c.want {
			t.Errorf("%s: slept = %v, want %v", c.name, got, c.want)
		}
	}
}
