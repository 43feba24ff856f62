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
