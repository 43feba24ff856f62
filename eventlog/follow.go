package eventlog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// followQueue is how many messages a Follower holds that its reader has
// not taken yet: few, since a message can be a 256 KiB chunk; the pull
// (maxBytes) bounds the rest.
const followQueue = 16

// Follower reads a stream in order; see Follow.
type Follower struct {
	p      *Pump
	closed <-chan struct{} // the consumer stopped (nats.go makes a goroutine per Closed call: asked once)
	js     jetstream.JetStream
	stream string
	cons   jetstream.Consumer
}

// ErrFollowerClosed is returned by Follower.Next once its consumer has
// stopped for good (the connection closed).
var ErrFollowerClosed = errors.New("eventlog: follower closed")

// Follow reads every line subject of stream (PI_LOCAL or PI_ALL) after
// stream sequence after (0: from the start), through an ordered consumer
// that pulls at most maxBytes at a time: the way the views and the search
// index follow the streams. The caller stops the Follower.
//
// It consumes through a callback into a small queue (Pump) rather than
// through jetstream's Messages iterator: that iterator's subscription is a
// channel exactly as long as one pull, and the server's idle heartbeats
// and status replies take places in it too. A reader busy for longer than
// two heartbeats (a search batch written under load) with a pull nearly
// delivered filled it, and nats.go dropped what came next ("slow
// consumer"): a heartbeat, or a line, which made the ordered consumer start
// over. A callback that blocks holds the messages in nats.go's
// subscription instead (limits far above one pull) and stops its
// heartbeat check while it waits, so a slow reader only slows the pulls.
func Follow(ctx context.Context, js jetstream.JetStream, stream string, after uint64, maxBytes int) (*Follower, error) {
	filter := LocalPrefix + ".>"
	if stream == AllStream {
		filter = AllPrefix + ".>"
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}
	if after > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = after + 1
	}
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("consumer on %s: %w", stream, err)
	}
	p, err := NewPump(cons, followQueue, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("consumer on %s: %w", stream, err)
	}
	return &Follower{p: p, closed: p.cc.Closed(), js: js, stream: stream, cons: cons}, nil
}

// Next waits for the next message. The ordered consumer recovers from
// what it reports on the way (a missed heartbeat, a gap) by itself; Next
// ends early only when ctx does or the consumer has stopped for good.
func (f *Follower) Next(ctx context.Context) (jetstream.Msg, error) {
	select {
	case m := <-f.p.ch:
		return f.p.took(m), nil
	default:
	}
	select {
	case m := <-f.p.ch:
		return f.p.took(m), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-f.closed:
		return nil, ErrFollowerClosed
	}
}

// NextOr is Next, except that it also returns, with no message and true,
// once wake is closed (nil: never) and no message is waiting.
func (f *Follower) NextOr(ctx context.Context, wake <-chan struct{}) (jetstream.Msg, bool, error) {
	select {
	case m := <-f.p.ch:
		return f.p.took(m), false, nil
	default:
	}
	select {
	case m := <-f.p.ch:
		return f.p.took(m), false, nil
	case <-wake:
		return nil, true, nil
	case <-ctx.Done():
		return nil, false, context.Cause(ctx)
	case <-f.closed:
		return nil, false, ErrFollowerClosed
	}
}

// Stop ends the consumer, waits for its callback to return and deletes
// the consumer from the server. Left for nats.go's five minutes of
// inactivity, a thousand tails or web pages opened and closed within them
// filled the stream's thousand consumers, and every consumer the daemon
// made on it then failed, the forwarder's and the views' among them (a
// probe, 2026-12-07).
func (f *Follower) Stop() {
	f.p.Stop()
	deleteConsumer(f.js, f.stream, f.cons)
}

// Handled is the last stream sequence a follower has handled, for others
// to wait on (an erase: its session is gone from what the follower keeps
// once the erase event is handled; the daemon's settle after the first
// read). A waiter sleeps until a Store, not on a timer: one may wait for
// hours on an idle daemon.
type Handled struct {
	mu   sync.Mutex
	seq  uint64
	wake chan struct{} // closed by the next Store; nil while nobody waits
}

// Load returns the last sequence handled.
func (h *Handled) Load() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// Store records seq as the last sequence handled.
func (h *Handled) Store(seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.set(seq)
}

// Advance records seq unless a later sequence is recorded already: a
// follower starting from a saved position has handled what it covers.
func (h *Handled) Advance(seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seq < seq {
		h.set(seq)
	}
}

// set records seq and wakes the waiters; h.mu is held.
func (h *Handled) set(seq uint64) {
	h.seq = seq
	if h.wake != nil {
		close(h.wake)
		h.wake = nil
	}
}

// Wait returns once the follower has handled the message at seq, or with
// an error when ctx ends first.
func (h *Handled) Wait(ctx context.Context, seq uint64) error {
	for {
		h.mu.Lock()
		if h.seq >= seq {
			h.mu.Unlock()
			return nil
		}
		if h.wake == nil {
			h.wake = make(chan struct{})
		}
		wake := h.wake
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for seq %d: %w", seq, ctx.Err())
		case <-wake:
		}
	}
}
