package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HdrHubSeq is, on PI_ALL, the message's sequence in the hub's PI_HUB.
const HdrHubSeq = "Pi-Hub-Seq"

// Downloader copies the hub's PI_HUB into this node's PI_ALL, in hub order,
// exactly once. PI_ALL is its own checkpoint: its last message says which
// hub sequence was copied last, and every write states the PI_ALL sequence
// it expects to follow, so a restart, a lost reply or a second downloader
// can never store a message twice.
type Downloader struct {
	nc     *nats.Conn
	local  jetstream.JetStream
	hub    jetstream.JetStream
	all    *All
	logger *slog.Logger

	copied    atomic.Int64
	connected atomic.Bool
}

// NewDownloader copies from the hub domain over nc into all.
func NewDownloader(nc *nats.Conn, all *All, hubDomain string, logger *slog.Logger) (*Downloader, error) {
	hub, err := jetstream.NewWithDomain(nc, hubDomain)
	if err != nil {
		return nil, fmt.Errorf("eventlog: downloader: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Downloader{nc: nc, local: all.js, hub: hub, all: all, logger: logger}, nil
}

// DownloaderStats are the downloader's counters.
type DownloaderStats struct {
	Copied    int64 `json:"copied"`
	Connected bool  `json:"hubReachable"`
}

// Stats returns the counters.
func (d *Downloader) Stats() DownloaderStats {
	return DownloaderStats{Copied: d.copied.Load(), Connected: d.connected.Load()}
}

// Run copies until ctx ends; failures (the hub unreachable) are retried
// with a backoff of at most five seconds.
func (d *Downloader) Run(ctx context.Context) error {
	runSessions(ctx, d.logger, "copying from the hub paused; retrying", &d.copied, &d.connected, d.session)
	return nil
}

// position reads PI_ALL's last sequence and the hub sequence it holds.
func (d *Downloader) position(ctx context.Context) (allSeq, hubSeq uint64, err error) {
	info, err := d.all.stream.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("downloader: %s: %w", AllStream, err)
	}
	allSeq = info.State.LastSeq
	if info.State.Msgs == 0 {
		return allSeq, 0, nil
	}
	// The last message still held: an erased session's may be gone (the
	// stream's last sequence stays, and is what the next write expects).
	// Whatever the hub holds after it is then copied again; only the
	// erased session's lines can be there, and its erase event after them.
	m, err := d.all.stream.GetLastMsgForSubject(ctx, AllPrefix+".>")
	if err != nil {
		return 0, 0, fmt.Errorf("downloader: last message of %s: %w", AllStream, err)
	}
	hubSeq, err = strconv.ParseUint(m.Header.Get(HdrHubSeq), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("downloader: last message of %s has no %s", AllStream, HdrHubSeq)
	}
	return allSeq, hubSeq, nil
}

func (d *Downloader) session(ctx context.Context) error {
	allSeq, hubSeq, err := d.position(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cfg := jetstream.OrderedConsumerConfig{InactiveThreshold: 30 * time.Second}
	if hubSeq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = hubSeq + 1
	}
	cons, err := d.hub.OrderedConsumer(cctx, HubStream, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("downloader: hub consumer: %w", err)
	}
	p, err := NewPump(cons, 512, 8<<20)
	if err != nil {
		return fmt.Errorf("downloader: %w", err)
	}
	defer p.Stop()
	d.connected.Store(true)
	progress := newBacklog(d.logger, "copying a backlog from the hub")
	var batch []jetstream.Msg
	for {
		// A stall watchdog: an ordered consumer whose hub went away
		// reports it through the error handler; idle otherwise.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err = p.Next(wctx, MaxBatch, batch[:0])
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			if err := p.Err(); err != nil {
				return fmt.Errorf("downloader: %w", err)
			}
			continue
		}
		if err != nil {
			return err
		}
		// Atomic batches of at most 8 MiB: one fsync each, and a
		// bounded staging store on the server.
		for rest := batch; len(rest) > 0; {
			n, size := 0, 0
			for n < len(rest) && (n == 0 || size+len(rest[n].Data()) <= 8<<20) {
				size += len(rest[n].Data())
				n++
			}
			if allSeq, err = d.store(ctx, allSeq, rest[:n]); err != nil {
				return err
			}
			rest = rest[n:]
		}
		progress.update(len(batch), numPending(batch[len(batch)-1]), time.Now())
	}
}

// store writes hub messages into PI_ALL after sequence last, as one
// atomic batch (one fsync) or, for a single message, a plain publish.
func (d *Downloader) store(ctx context.Context, last uint64, msgs []jetstream.Msg) (uint64, error) {
	out := make([]*nats.Msg, 0, len(msgs))
	for _, m := range msgs {
		meta, err := m.Metadata()
		if err != nil {
			return last, fmt.Errorf("downloader: %w", err)
		}
		node, sid, err := ParseSubject(m.Subject())
		if err != nil {
			d.logger.Warn("downloader: skipping a message with a foreign subject", "subject", m.Subject())
			continue
		}
		nm := nats.NewMsg(AllSubject(node, sid))
		for k, v := range m.Headers() {
			if len(k) > 3 && k[:3] == "Pi-" {
				nm.Header[k] = v
			}
		}
		nm.Header.Set(HdrHubSeq, strconv.FormatUint(meta.Sequence.Stream, 10))
		nm.Data = m.Data()
		out = append(out, nm)
	}
	if len(out) == 0 {
		return last, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seq uint64
	if len(out) == 1 {
		ack, err := d.local.PublishMsg(ctx, out[0], jetstream.WithExpectLastSequence(last))
		if err != nil {
			return last, fmt.Errorf("downloader: store: %w", err)
		}
		seq = ack.Sequence
	} else {
		var err error
		if seq, err = publishAtomic(ctx, d.nc, out, hdrExpLastSeq, last); err != nil {
			return last, fmt.Errorf("downloader: store: %w", err)
		}
	}
	d.copied.Add(int64(len(out)))
	return seq, nil
}
