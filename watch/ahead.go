package watch

import (
	"context"
)

// Reading ahead. A long first read (a session of megabytes of images, a
// long conversation) is a series of flushBytes batches. Published one
// after the other, the store sat idle while the worker read, hashed and
// parsed the next batch, and the worker sat idle while the store wrote and
// fsynced: the images session ran at about half the raw publish rate. So a
// full batch is stored in the background while the worker reads the next.
//
// At most one batch is in flight per read, and the next publish starts
// only once it is stored: each batch still states the subject sequence it
// follows (known only from the store's reply to the one before), the
// session's lock is taken in order, and the read position still moves
// only past lines that are durable, batch by batch. A live append (one
// small read) is published as before, with no hand-off.

// inflight is a batch being stored while its read goes on.
type inflight struct {
	p    pending    // the batch: committed to the file once stored
	done chan error // the publish's outcome
}

// flushAhead starts storing p's lines in the background (after the batch
// in flight, if any, is stored and committed) and leaves p empty for the
// lines after them.
func (w *worker) flushAhead(ctx context.Context, f *file, p *pending) error {
	if err := w.settle(f, p); err != nil {
		return err
	}
	a := &inflight{p: *p, done: make(chan error, 1)} // p.ahead is nil: settled
	*p = pending{off: p.off, ahead: a}
	s, lines := f.sess, a.p.lines
	go func() { a.done <- w.t.publish(ctx, s, lines) }()
	return nil
}

// settle waits for p's batch in flight, if any, and commits it. A batch
// that failed gives its budget back; the read stops with its error and is
// retried from the last committed position (the store deduplicates what
// it holds by hash).
func (w *worker) settle(f *file, p *pending) error {
	a := p.ahead
	if a == nil {
		return nil
	}
	p.ahead = nil
	if err := <-a.done; err != nil {
		w.t.mem.release(a.p.held)
		return err
	}
	clear(a.p.lines)
	a.p.lines = nil // stored: commit publishes nothing
	return w.flush(context.Background(), f, &a.p)
}
