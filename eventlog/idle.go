package eventlog

import "sync"

// idleGate says whether some work is under way, as a channel closed while
// it is not, so that a waiter selects on it with its context. The zero
// value is idle.
type idleGate struct {
	mu   sync.Mutex
	busy chan struct{} // nil while idle; closed when the work ends
}

// closedChan is what wait returns while no work is under way.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// set marks the work under way or not.
func (g *idleGate) set(busy bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case busy && g.busy == nil:
		g.busy = make(chan struct{})
	case !busy && g.busy != nil:
		close(g.busy)
		g.busy = nil
	}
}

// wait returns a channel closed once no work is under way (at once if
// none is now).
func (g *idleGate) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy == nil {
		return closedChan
	}
	return g.busy
}
