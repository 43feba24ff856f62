package eventlog

import (
	"context"
	"encoding/hex"
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
)

// MaxBatch is the server's default limit of messages in one atomic batch.
const MaxBatch = 1000

// smallGroup is the most lines published one by one. An atomic batch costs a
// staged on-disk store on the server (≈5 ms), so a handful of lines goes
// faster as single publishes; exactly-once does not need the atomicity, since
// a restart reads back what the stream holds.
const smallGroup = 16

// ErrWrongLastSequence means the subject had moved on from the sequence the
// publisher expected. The caller must re-read the subject and retry.
var ErrWrongLastSequence = errors.New("eventlog: wrong last subject sequence")

// Publisher publishes session lines to a stream, exactly once per subject
// position: every publish states the subject sequence it expects to follow.
type Publisher struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	timeout time.Duration
}

// NewPublisher returns a publisher over nc. timeout bounds each request.
func NewPublisher(nc *nats.Conn, js jetstream.JetStream, timeout time.Duration) *Publisher {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Publisher{nc: nc, js: js, timeout: timeout}
}

// Publish stores lines on subj in order, after the message with subject
// sequence last (0: the subject must be empty). It returns the subject's new
// last sequence and how many lines were stored; on error the lines before
// that count are durable and the rest are not.
func (p *Publisher) Publish(ctx context.Context, subj string, last uint64, lines []Line) (uint64, int, error) {
	chunked := false
	for i := range lines {
		if lines[i].Chunks() > 1 {
			chunked = true
			break
		}
	}
	if len(lines) <= smallGroup && !chunked {
		for i := range lines {
			seq, err := p.publishOne(ctx, subj, last, &lines[i])
			if err != nil {
				return last, i, err
			}
			last = seq
		}
		return last, len(lines), nil
	}
	done := 0
	for done < len(lines) {
		n, msgs := 0, 0
		for done+n < len(lines) {
			c := lines[done+n].Chunks()
			if c > MaxBatch {
				return last, done, fmt.Errorf("eventlog: a line of %d bytes needs %d chunks, more than a batch holds (%d)", len(lines[done+n].Raw), c, MaxBatch)
			}
			if msgs+c > MaxBatch {
				break
			}
			msgs += c
			n++
		}
		seq, err := p.publishBatch(ctx, subj, last, lines[done:done+n], msgs)
		if err != nil {
			return last, done, err
		}
		last = seq
		done += n
	}
	return last, done, nil
}

func msgID(subj string, l *Line) string {
	return subj + ":" + hex.EncodeToString(l.Sha[:16])
}

func (p *Publisher) publishOne(ctx context.Context, subj string, last uint64, l *Line) (uint64, error) {
	m := l.messages(subj, msgID(subj, l))[0]
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	ack, err := p.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(last))
	if err != nil {
		if IsWrongLastSequence(err) {
			return 0, fmt.Errorf("%w: %s after %d", ErrWrongLastSequence, subj, last)
		}
		return 0, fmt.Errorf("eventlog: publish %s: %w", subj, err)
	}
	return ack.Sequence, nil
}

// pubAck is the server's reply to a batch commit.
type pubAck struct {
	Stream    string              `json:"stream"`
	Sequence  uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate,omitempty"`
	Count     int                 `json:"count,omitempty"`
	Error     *jetstream.APIError `json:"error,omitempty"`
}

func (p *Publisher) publishBatch(ctx context.Context, subj string, last uint64, lines []Line, total int) (uint64, error) {
	id := nuid.Next()
	seq := 0
	var commit *nats.Msg
	for i := range lines {
		for _, m := range lines[i].messages(subj, msgID(subj, &lines[i])) {
			seq++
			m.Header.Set(hdrBatchID, id)
			m.Header.Set(hdrBatchSeq, strconv.Itoa(seq))
			if seq == 1 {
				m.Header.Set(hdrExpLastSubj, strconv.FormatUint(last, 10))
			}
			if seq == total {
				m.Header.Set(hdrBatchCommit, "1")
				commit = m
				break
			}
			if err := p.nc.PublishMsg(m); err != nil {
				return 0, fmt.Errorf("eventlog: batch publish %s: %w", subj, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	resp, err := p.nc.RequestMsgWithContext(ctx, commit)
	if err != nil {
		return 0, fmt.Errorf("eventlog: batch commit %s: %w", subj, err)
	}
	var ack pubAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("eventlog: batch commit %s: bad reply %q: %w", subj, resp.Data, err)
	}
	if ack.Error != nil {
		if ack.Error.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return 0, fmt.Errorf("%w: %s after %d", ErrWrongLastSequence, subj, last)
		}
		return 0, fmt.Errorf("eventlog: batch commit %s: %w", subj, ack.Error)
	}
	if ack.Count != total {
		return 0, fmt.Errorf("eventlog: batch commit %s: stored %d of %d messages", subj, ack.Count, total)
	}
	return ack.Sequence, nil
}
