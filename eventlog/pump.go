package eventlog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Pump turns a consumer's callbacks into a bounded queue, so a worker can
// wait for the first message and then take whatever else has already
// arrived without waiting any longer: a fixed "wait a little for more"
// would add its delay to every live line.
type Pump struct {
	cc  jetstream.ConsumeContext
	ch  chan jetstream.Msg
	err chan error

	// The payload bytes of the messages in ch are bounded by maxBytes too,
	// and what one call takes: a message can be a 256 KiB chunk, and
	// bounded by count alone the forwarder's queue and window held up to
	// 1,024 of them each, a quarter of a gigabyte apiece, past the
	// daemon's memory budget on a backlog of images.
	maxBytes int
	mu       sync.Mutex
	room     sync.Cond // signalled when queued falls
	queued   int
	stopped  bool
	waits    int // times the callback waited for room (the tests')
}

// NewPump consumes into a queue of at most size messages and maxBytes of
// payload, pulling at most maxBytes at a time: together they bound the
// memory a fast producer can take. Its pulls ask for LocalHeartbeat; opts
// add to the pull's settings or replace them (the hub's heartbeat).
func NewPump(cons jetstream.Consumer, size, maxBytes int, opts ...jetstream.PullConsumeOpt) (*Pump, error) {
	p := &Pump{ch: make(chan jetstream.Msg, size), err: make(chan error, 1), maxBytes: maxBytes}
	p.room.L = &p.mu
	opts = append([]jetstream.PullConsumeOpt{PullLimit(maxBytes), LocalHeartbeat()}, opts...)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		// Blocks while the queue is full: back-pressure, never an
		// unbounded queue. A message alone may exceed maxBytes.
		n := len(m.Data())
		p.mu.Lock()
		for p.queued > 0 && p.queued+n > p.maxBytes && !p.stopped {
			p.waits++
			p.room.Wait()
		}
		p.queued += n
		p.mu.Unlock()
		p.ch <- m
	}, append(opts, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			// nats.go has already acted on it: a plain consumer
			// pulls again, an ordered one starts over. Reporting it
			// would end the reader's session for nothing.
			return
		}
		select {
		case p.err <- err:
		default:
		}
	}))...)
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	p.cc = cc
	return p, nil
}

// Next waits for one message, then appends up to max-1 more: those already
// queued, and, while the consumer says more are pending (a backlog), those
// still on their way, so that catching up writes full batches while a live
// line never waits for company.
func (p *Pump) Next(ctx context.Context, max int, out []jetstream.Msg) ([]jetstream.Msg, error) {
	select {
	case <-ctx.Done():
		return out, context.Cause(ctx)
	case m := <-p.ch:
		return p.fill(ctx, max, append(out, p.took(m)), nil), nil
	}
}

// took gives a message's bytes back to the queue as its reader takes it,
// and returns it.
func (p *Pump) took(m jetstream.Msg) jetstream.Msg {
	p.mu.Lock()
	p.queued -= len(m.Data())
	p.mu.Unlock()
	p.room.Signal() // the one callback, when it waits
	return m
}

// NextOrFail is Next, except that an error the consumer reports while it
// waits ends the wait at once (returned now, or by the next call when
// messages came first). The downloader's consumer stops at a gap and
// reports it that way (orderedPull): nothing comes after it, and a
// watchdog that looked for the error only after seconds of silence made a
// catch-up stall that long.
func (p *Pump) NextOrFail(ctx context.Context, max int, out []jetstream.Msg) ([]jetstream.Msg, error) {
	select {
	case <-ctx.Done():
		return out, context.Cause(ctx)
	case err := <-p.err:
		return out, fmt.Errorf("consume: %w", err)
	case m := <-p.ch:
		return p.fill(ctx, max, append(out, p.took(m)), p.err), nil
	}
}

// fill appends to out, which holds at least one message, what Next takes
// after the first: at most max messages in all, and no more once they
// hold maxBytes. An error on errc (nil: none looked for) ends the wait
// and is kept for the next call.
func (p *Pump) fill(ctx context.Context, max int, out []jetstream.Msg, errc chan error) []jetstream.Msg {
	size := 0
	for _, m := range out {
		size += len(m.Data())
	}
	for len(out) < max && size < p.maxBytes {
		select {
		case m := <-p.ch:
			out = append(out, p.took(m))
			size += len(m.Data())
			continue
		default:
		}
		if !pending(out[len(out)-1]) {
			return out
		}
		select {
		case m := <-p.ch:
			out = append(out, p.took(m))
			size += len(m.Data())
		case <-ctx.Done():
			return out // what we have is a batch
		case err := <-errc:
			select {
			case errc <- err: // for the next call
			default:
			}
			return out
		}
	}
	return out
}

// NextOr is Next, except that when msgs come on hints first, it returns
// those (appended to out) instead, and true.
func (p *Pump) NextOr(ctx context.Context, max int, out []jetstream.Msg, hints <-chan []jetstream.Msg) ([]jetstream.Msg, bool, error) {
	select {
	case <-ctx.Done():
		return out, false, context.Cause(ctx)
	case msgs := <-hints:
		return append(out, msgs...), true, nil
	case m := <-p.ch:
		return p.fill(ctx, max, append(out, p.took(m)), nil), false, nil
	}
}

// pending reports whether the consumer had more messages after m.
func pending(m jetstream.Msg) bool { return numPending(m) > 0 }

// Err returns a consume error reported since the last call, if any.
func (p *Pump) Err() error {
	select {
	case err := <-p.err:
		return err
	default:
		return nil
	}
}

// Stop ends the consumer; a callback blocked on a full queue is released.
func (p *Pump) Stop() {
	p.cc.Stop()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.room.Broadcast()
	for {
		select {
		case <-p.ch:
		case <-p.cc.Closed():
			return
		}
	}
}
