package watch

import (
	"context"
	"sync"
)

// budget bounds the bytes of lines the tailer holds at once, across all
// its workers: the lines a worker has read and not yet published, and a
// long line while it is read back, parsed and published. A worker waits
// for room only while it holds nothing (it publishes what it holds
// first), so two workers can never wait for each other. A request larger
// than the whole budget waits until it can have all of it. Waiters are
// served in order, so one large line is not passed over forever by small
// ones.
type budget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	peak    int64
	waits   int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newBudget(size int64) *budget { return &budget{size: size} }

// clamp is what a request of n bytes takes.
func (b *budget) clamp(n int64) int64 { return min(n, b.size) }

// tryAcquire takes n bytes (clamped) if they are free now and nobody waits.
func (b *budget) tryAcquire(n int64) (int64, bool) {
	n = b.clamp(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 || b.used+n > b.size {
		return 0, false
	}
	b.take(n)
	return n, true
}

// tryAcquireAll takes exactly n bytes if they are free now and nobody
// waits; never part of them (a request over the whole budget gets none).
func (b *budget) tryAcquireAll(n int64) bool {
	if n > b.size {
		return false
	}
	_, ok := b.tryAcquire(n)
	return ok
}

// acquire takes n bytes (clamped), waiting for them; it returns what it
// took.
func (b *budget) acquire(ctx context.Context, n int64) (int64, error) {
	n = b.clamp(n)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.take(n)
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.waits++
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready:
			// Granted meanwhile: give it back.
			b.used -= n
			b.wake()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.wake() // the next in line may fit now
		}
		return 0, context.Cause(ctx)
	}
}

// release gives n bytes back.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.wake()
	b.mu.Unlock()
}

func (b *budget) take(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
}

// wake grants waiters in order while they fit. Called with mu held.
func (b *budget) wake() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.size {
			return
		}
		b.take(w.n)
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}

// state returns the bytes held now, the most ever held and how often a
// worker had to wait.
func (b *budget) state() (used, peak, waits int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak, b.waits
}
