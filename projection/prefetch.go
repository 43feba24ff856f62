package projection

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// maxChunks is the most messages a line can take (the tailer's 16 MiB line
// limit over 256 KiB chunks): a read that must see a line's first chunk
// starts this far before the line's ref.
const maxChunks = 64

// runGap is the most sequences between two wanted bodies that one read
// passes over; wanted bodies further apart are read by separate consumers
// (a compaction's summary far after the entries it kept, an edit far
// after the entry it edits), so that a stretch of the window never reads
// much of the session it does not need.
const runGap = 4096

// prefetch reads the bodies of refs into the cache, in stream order, with
// one ordered consumer per stream and run of nearby sequences over the
// session's subjects. Measured on a 10k-entry session this is ~30× faster
// than batched direct gets, whose server side computes the pending count
// per message (quadratic in the subject's size).
func (b *streamBodies) prefetch(ctx context.Context, refs []session.Ref, put func(session.Ref, []byte)) error {
	by := map[string][]uint64{}
	for _, r := range refs {
		by[refStream(r)] = append(by[refStream(r)], refSeq(r))
	}
	for stream, seqs := range by {
		filter, ok := b.filters[stream]
		if !ok {
			continue
		}
		slices.Sort(seqs)
		seqs = slices.Compact(seqs)
		for len(seqs) > 0 {
			n := 1
			for n < len(seqs) && seqs[n]-seqs[n-1] <= runGap {
				n++
			}
			run := seqs[:n]
			seqs = seqs[n:]
			need := make(map[uint64]bool, len(run))
			for _, s := range run {
				need[s] = true
			}
			lo, hi := run[0], run[len(run)-1]
			if err := b.read(ctx, stream, filter, max(1, lo-min(lo, maxChunks)), hi, need, put); err != nil {
				return err
			}
		}
	}
	return nil
}

// read reads the bodies of need from sequences from to to of filter on
// stream, handing each to put. It runs on a stretch's own goroutine: it
// touches nothing of b that the query changes.
func (b *streamBodies) read(ctx context.Context, stream, filter string, from, to uint64, need map[uint64]bool, put func(session.Ref, []byte)) error {
	js := b.js
	b.reads.Add(1)
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{filter},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("projection: read bodies: %w", err)
	}
	defer func() {
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			js.DeleteConsumer(dctx, stream, info.Name)
			cancel()
		}
	}()
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		return nil
	}
	it, err := cons.Messages(eventlog.PullLimit(bodyBytes), eventlog.LocalHeartbeat()) // bounded by bytes: messages are up to a chunk (256 KiB) each
	if err != nil {
		return fmt.Errorf("projection: read bodies: %w", err)
	}
	defer it.Stop()
	asm := eventlog.NewAssemblers(false)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("projection: read bodies: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("projection: read bodies: %w", err)
		}
		seq := meta.Sequence.Stream
		if seq > to {
			return nil
		}
		subj := msg.Subject()
		if ev, err := asm.Add(stream, subj, seq, msg.Headers(), msg.Data()); err == nil && ev != nil && ev.Op == "" && need[ev.Seq] {
			put(makeRef(stream, ev.Seq), session.ToValidUTF8(ev.Raw))
		}
		if seq >= to || meta.NumPending == 0 {
			return nil
		}
	}
}
