// Package foreground lets background work give way while a person waits
// on an answer: the search index's batches (minutes of CPU after a large
// first read) pause while a `context` query or a session page is being
// served, which otherwise share the two cores with them; AndIdle adds other
// work that goes first (a catch-up from the hub, a backlog on its way to it).
package foreground

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Gate counts foreground work under way. The zero Gate is not ready; use
// New. A nil *Gate never holds anything back.
type Gate struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n == 0
}

// New returns a gate with nothing under way.
func New() *Gate {
	g := &Gate{idle: make(chan struct{})}
	close(g.idle)
	return g
}

// Enter marks foreground work under way until leave is called (once;
// more calls do nothing).
func (g *Gate) Enter() (leave func()) {
	if g == nil {
		return func() {}
	}
	g.mu.Lock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			if g.n--; g.n == 0 {
				close(g.idle)
			}
			g.mu.Unlock()
		})
	}
}

// Wait returns once no foreground work is under way, or after max even
// if some is (a stream of queries slows the background down, never
// stops it), or with ctx's error when ctx ends first.
func (g *Gate) Wait(ctx context.Context, max time.Duration) error {
	return waitClosed(ctx, g.idleNow(), time.Now().Add(max))
}

// idleNow is the channel closed once no foreground work is under way (a
// nil Gate's is closed).
func (g *Gate) idleNow() <-chan struct{} {
	if g == nil {
		return closed
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.idle
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// waitClosed returns once c is closed or deadline has passed, or with
// ctx's error when ctx ends first.
func waitClosed(ctx context.Context, c <-chan struct{}, deadline time.Time) error {
	select {
	case <-c:
		return nil
	default:
	}
	left := time.Until(deadline)
	if left <= 0 {
		return nil
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-c:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Handler marks each request h serves as foreground work.
func (g *Gate) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer g.Enter()()
		h.ServeHTTP(w, r)
	})
}

// Waiter is what background work waits on before each step (Gate.Wait).
type Waiter interface {
	Wait(ctx context.Context, max time.Duration) error
}

// AndIdle returns a Waiter that waits for g and then for each of idle's
// channels to be closed (each closed while work of more weight than the
// waiter's is not under way, as eventlog.Downloader.Idle), all within one
// max: such work slows the waiter down, never stops it.
func (g *Gate) AndIdle(idle ...func() <-chan struct{}) Waiter {
	return andIdle{g: g, idle: idle}
}

type andIdle struct {
	g    *Gate
	idle []func() <-chan struct{}
}

func (a andIdle) Wait(ctx context.Context, max time.Duration) error {
	deadline := time.Now().Add(max)
	if err := waitClosed(ctx, a.g.idleNow(), deadline); err != nil {
		return err
	}
	for _, idle := range a.idle {
		if err := waitClosed(ctx, idle(), deadline); err != nil {
			return err
		}
	}
	return nil
}
