package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Atomic batch protocol headers (ADR-50). nats.go has no batch publisher
// yet; the protocol is small: every message carries the batch id and its
// 1-based sequence, the last one asks for the commit and gets the PubAck.
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
	hdrExpLastSubj = "Nats-Expected-Last-Subject-Sequence"
	hdrExpLastSeq  = "Nats-Expected-Last-Sequence"
)

// MaxBatch is the server's default limit of messages in one atomic batch.
const MaxBatch = 1000

// MaxBatchBytes bounds the lines of one atomic batch (a single longer
// line is a batch of its own). The server answers a batch only once all of
// it has arrived: to the hub, over the uplink. Bounded by count alone, a
// backlog of images (lines of 256 KiB chunks) made batches of up to
// 250 MB, minutes of a home uplink for one request.
const MaxBatchBytes = 8 << 20

// slowLink is the slowest link a request's bytes are allowed time for, on
// top of the publisher's timeout, which is for a server that does not
// answer: 8 MiB at 128 KiB/s (one megabit a second) is 64 s more. With
// the timeout alone, a batch the uplink needed longer for than that to
// carry failed every time it was sent (TestForwardOverSlowLink). A
// publisher whose link is watched allows for a slower one (carryRate,
// Forwarder.WatchLink).
const slowLink = 128 << 10 // bytes a second

// smallGroup is the most lines published one by one. An atomic batch costs a
// staged on-disk store on the server (≈5 ms), so a handful of lines goes
// faster as single publishes; exactly-once does not need the atomicity, since
// a restart reads back what the stream holds.
const smallGroup = 16

// ErrWrongLastSequence means the subject had moved on from the sequence the
// publisher expected. The caller must re-read the subject and retry.
var ErrWrongLastSequence = errors.New("eventlog: wrong last subject sequence")

// ErrStoreUnavailable means the store cannot take writes now (typically its
// disk is full). Nothing was stored by the publish that returned it; the
// caller retries later, and the store's owner brings it back.
var ErrStoreUnavailable = errors.New("eventlog: the store cannot take writes")

// Writable returns a context that is done while the store cannot take
// writes, with the reason as its cause, and a live one while it can. A
// nats-server stream that hit a write error never answers a publish (the
// client only sees its own timeout), so the publisher asks before each
// publish and gives up on one in flight as soon as the store breaks.
type Writable func() context.Context

// Publisher publishes session lines to a stream, exactly once per subject
// position: every publish states the subject sequence it expects to follow.
type Publisher struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	timeout  time.Duration
	carry    int      // the slowest link allowed for, bytes a second
	writable Writable // nil: always try
	suspect  func()   // nil: nobody to tell (SetSuspect)
	stored   hints    // the local log's: what a single publish stored (Local.Stored)
}

// NewPublisher returns a publisher over nc. timeout bounds each request.
func NewPublisher(nc *nats.Conn, js jetstream.JetStream, timeout time.Duration) *Publisher {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Publisher{nc: nc, js: js, timeout: timeout, carry: slowLink}
}

// SetWritable makes the local log's publisher consult w (see Writable).
// Call it before the first publish.
func (l *Local) SetWritable(w Writable) { l.pub.writable = w }

// SetSuspect makes the local log's publisher call suspect after a write
// that failed for no reason of the publisher's own: not an expected
// sequence, not a store already known to fail, not the caller giving up.
// The stream's health does not show every full disk: an atomic batch is
// staged apart from the stream, and a batch the disk cannot stage fails as
// "incomplete" while the stream stays healthy, so the store's owner checks
// the disk itself (embedded.StoreWatch.Suspect). Call it before the first
// publish.
func (l *Local) SetSuspect(suspect func()) { l.pub.suspect = suspect }

// suspectStore calls suspect (when set) unless err is the caller's own
// doing: an expected sequence that did not hold, a store already known to
// fail, or ctx, the caller's context, ending. It returns err.
func suspectStore(suspect func(), ctx context.Context, err error) error {
	if suspect != nil && ctx.Err() == nil &&
		!errors.Is(err, ErrWrongLastSequence) && !IsWrongLastSequence(err) && !errors.Is(err, ErrStoreUnavailable) {
		suspect()
	}
	return err
}

// request bounds one request that carries size bytes by the publisher's
// timeout, plus the time a slow link takes to carry them, and, with a
// Writable, by the store staying writable. It fails at once, with
// ErrStoreUnavailable, when the store is known not to take writes.
func (p *Publisher) request(ctx context.Context, size int) (context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout+carryTime(size, p.carry))
	if p.writable == nil {
		return ctx, cancel, nil
	}
	w := p.writable()
	if w.Err() != nil {
		cancel()
		return nil, nil, storeUnavailable(w)
	}
	ctx, cancelCause := context.WithCancelCause(ctx)
	stop := context.AfterFunc(w, func() { cancelCause(storeUnavailable(w)) })
	return ctx, func() {
		stop()
		cancelCause(nil)
		cancel()
	}, nil
}

func storeUnavailable(w context.Context) error {
	return fmt.Errorf("%w: %w", ErrStoreUnavailable, context.Cause(w))
}

// cause prefers why ctx was cancelled (the store broke) to the bare
// context error a request returns.
func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && errors.Is(c, ErrStoreUnavailable) {
		return c
	}
	return err
}

// Publish stores lines on subj in order, after the message with subject
// sequence last (0: the subject must be empty). It returns the subject's new
// last sequence and how many lines were stored; on error the lines before
// that count are durable and the rest are not.
func (p *Publisher) Publish(ctx context.Context, subj string, last uint64, lines []Line) (uint64, int, error) {
	if !needsBatch(lines) {
		return p.publishSingly(ctx, subj, last, lines)
	}
	done := 0
	for done < len(lines) {
		n, msgs, size := 0, 0, 0
		for done+n < len(lines) {
			l := &lines[done+n]
			c, b := l.Chunks(), l.size()
			if c > MaxBatch {
				return last, done, fmt.Errorf("eventlog: a line of %d bytes needs %d chunks, more than a batch holds (%d)", len(l.Raw), c, MaxBatch)
			}
			if n > 0 && (msgs+c > MaxBatch || size+b > MaxBatchBytes) {
				break
			}
			msgs, size, n = msgs+c, size+b, n+1
		}
		seq, err := p.publishBatch(ctx, subj, last, lines[done:done+n], msgs, size)
		if err != nil {
			return last, done, err
		}
		last = seq
		done += n
	}
	return last, done, nil
}

// needsBatch reports whether Publish stores lines as atomic batches: more
// than a small group, or a line of several chunks.
func needsBatch(lines []Line) bool {
	if len(lines) > smallGroup {
		return true
	}
	for i := range lines {
		if lines[i].Chunks() > 1 {
			return true
		}
	}
	return false
}

// publishSingly stores lines on subj as Publish does, but each with a
// publish of its own, never as a batch; it stops before the first line of
// several chunks, which only a batch stores all or nothing. It returns the
// subject's new last sequence and how many lines were stored.
func (p *Publisher) publishSingly(ctx context.Context, subj string, last uint64, lines []Line) (uint64, int, error) {
	for i := range lines {
		if lines[i].Chunks() > 1 {
			return last, i, nil
		}
		seq, err := p.publishOne(ctx, subj, last, &lines[i])
		if err != nil {
			return last, i, err
		}
		last = seq
	}
	return last, len(lines), nil
}

// isBatchRefused reports whether err says the server took no part of an
// atomic batch: it was abandoned as incomplete (a message of it never came
// in time) or refused because the stream had as many batches open as it
// allows. Nothing of the batch was stored.
func isBatchRefused(err error) bool {
	return hasErrorCode(err, jsErrCodeBatchIncomplete, jsErrCodeBatchTooManyInflight)
}

// isShareFull reports whether err says the account has no room left: on
// the hub, the team's share of its store (every node of the team shares
// it, so one node can fill it for all).
func isShareFull(err error) bool {
	return hasErrorCode(err, jsErrCodeAccountResourcesExceeded)
}

// The server's error codes for an atomic batch it did not take, and for an
// account out of room (nats-server's errors.json).
const (
	jsErrCodeBatchIncomplete          jetstream.ErrorCode = 10176
	jsErrCodeBatchTooManyInflight     jetstream.ErrorCode = 10210
	jsErrCodeAccountResourcesExceeded jetstream.ErrorCode = 10002
)

func (p *Publisher) publishOne(ctx context.Context, subj string, last uint64, l *Line) (uint64, error) {
	m := l.messages(subj)[0]
	rctx, cancel, err := p.request(ctx, l.size())
	if err != nil {
		return 0, fmt.Errorf("eventlog: publish %s: %w", subj, err)
	}
	defer cancel()
	ack, err := p.js.PublishMsg(rctx, m, jetstream.WithExpectLastSequencePerSubject(last))
	if err != nil {
		if IsWrongLastSequence(err) {
			return 0, fmt.Errorf("%w: %s after %d", ErrWrongLastSequence, subj, last)
		}
		return 0, suspectStore(p.suspect, ctx, fmt.Errorf("eventlog: publish %s: %w", subj, cause(rctx, err)))
	}
	p.stored.offer(ack.Sequence, []*nats.Msg{m})
	return ack.Sequence, nil
}

// pubAck is the server's reply to a batch commit, as far as it is read
// (no message carries an id, so none is a duplicate).
type pubAck struct {
	Sequence uint64              `json:"seq"`
	Count    int                 `json:"count,omitempty"`
	Error    *jetstream.APIError `json:"error,omitempty"`
}

func (p *Publisher) publishBatch(ctx context.Context, subj string, last uint64, lines []Line, total, size int) (uint64, error) {
	msgs := make([]*nats.Msg, 0, total)
	for i := range lines {
		msgs = append(msgs, lines[i].messages(subj)...)
	}
	rctx, cancel, err := p.request(ctx, size)
	if err != nil {
		return 0, fmt.Errorf("eventlog: batch %s: %w", subj, err)
	}
	defer cancel()
	seq, err := publishAtomic(rctx, p.nc, msgs, hdrExpLastSubj, last)
	if err != nil {
		return 0, suspectStore(p.suspect, ctx, fmt.Errorf("eventlog: batch %s: %w", subj, cause(rctx, err)))
	}
	return seq, nil
}

// publishAtomic stores msgs as one ADR-50 atomic batch: all or nothing.
// The first message carries expect: value (an expected last sequence,
// checked against the stream as it was before the batch), unless expect
// is empty: the messages carry their own expectations (PublishGroups). Only the commit
// is a request; the others are plain publishes on the same connection, so
// they arrive in order before it.
func publishAtomic(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg, expect string, value uint64) (uint64, error) {
	setBatchHeaders(msgs, nuid.Next(), expect, value)
	for _, m := range msgs[:len(msgs)-1] {
		if err := nc.PublishMsg(m); err != nil {
			return 0, err
		}
	}
	resp, err := nc.RequestMsgWithContext(ctx, msgs[len(msgs)-1])
	if err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	var ack pubAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("commit: bad reply %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		if ack.Error.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return 0, fmt.Errorf("%w (expected %d)", ErrWrongLastSequence, value)
		}
		return 0, fmt.Errorf("commit: %w", ack.Error)
	}
	if ack.Count != len(msgs) {
		return 0, fmt.Errorf("commit: stored %d of %d messages", ack.Count, len(msgs))
	}
	return ack.Sequence, nil
}

// setBatchHeaders marks msgs as the atomic batch id: the first states
// expect (a Nats-Expected-* header) with value unless expect is empty,
// the last commits the batch.
func setBatchHeaders(msgs []*nats.Msg, id, expect string, value uint64) {
	vals := make(headerValues, 0, 2*len(msgs)+2)
	for i, m := range msgs {
		vals.set(m.Header, hdrBatchID, id)
		vals.set(m.Header, hdrBatchSeq, strconv.Itoa(i+1))
		if i == 0 && expect != "" {
			vals.set(m.Header, expect, strconv.FormatUint(value, 10))
		}
	}
	vals.set(msgs[len(msgs)-1].Header, hdrBatchCommit, "1")
}

// ErrRejected marks a remote event that the admission point passed over:
// it never enters PI_ALL, and it is no reason to stop copying.
var ErrRejected = errors.New("eventlog: rejected at admission")
