package eventlog

import (
	"context"
	"errors"
	"sync"
	"time"
)

// The leaf link to the hub, as the forwarder and the downloader watch it
// (embedded.Server.HubLink names it: "" while down, a new name once made
// again). What was sent over a link that is still up is on its way however
// slowly the link carries it; what was sent over one since replaced may be
// lost, and so may the hub's record of a pull made before it.

// linkPoll is how often the hub link is looked at.
const linkPoll = time.Second

// wakeGap is how much longer than its linkPoll a wait may take before it
// is taken for no wait at all: the process was stopped (SIGSTOP, a
// debugger) or the machine slept (a laptop's lid closed) meanwhile.
const wakeGap = 10 * time.Second

// slept reports whether a wait of linkPoll begun at began and ended at now
// spanned a sleep of this machine or a stop of the process: measured on the
// monotonic clock (a stop) or on the wall clock (a suspend, which Linux's
// monotonic clock does not count). A wall clock set forward reads as one,
// which costs a question to the hub.
func slept(began, now time.Time) bool {
	return now.Sub(began) > linkPoll+wakeGap || now.Round(0).Sub(began.Round(0)) > linkPoll+wakeGap
}

// carryRate is the slowest link, in bytes a second, waited for on a
// watched link that has not changed: a message the hub delivered is taken
// for lost once the link could have carried it at this rate, and a request
// to the hub (a batch) is given as long as the link takes to carry it.
const carryRate = 2 << 10

// carryTime is how long a link of rate bytes a second takes to carry n
// bytes.
func carryTime(n, rate int) time.Duration {
	return time.Duration(n) * time.Second / time.Duration(rate)
}

// waitLinked waits until there is a hub link (hubLink names one), and
// reports whether there is (false: ctx ended).
func waitLinked(ctx context.Context, hubLink func() string) bool {
	t := time.NewTicker(linkPoll)
	defer t.Stop()
	for hubLink() == "" {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// What was sent to the hub over a link that is gone is given up on with
// these causes.
var (
	errLinkDown    = errors.New("the hub link went down; what was sent over it is given up on")
	errLinkChanged = errors.New("the hub link was made again; what was sent over the old one is given up on")
)

// watchLink returns a context that ends when the link named by hubLink
// changes or goes down from what it is now (its cause errLinkChanged or
// errLinkDown), looking once every linkPoll; stop ends the watch and waits
// for it.
func watchLink(ctx context.Context, hubLink func() string) (wctx context.Context, stop func()) {
	at := hubLink()
	wctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(linkPoll)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			switch now := hubLink(); {
			case now == "":
				cancel(errLinkDown)
				return
			case now != at:
				cancel(errLinkChanged)
				return
			}
		}
	})
	return wctx, func() {
		cancel(nil)
		wg.Wait()
	}
}
