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

// prefetch reads the bodies of refs into the cache with one ordered
// consumer per stream over the session's subjects, from the lowest ref to
// the highest. Measured on a 10k-entry session this is ~30× faster than
// batched direct gets, whose server side computes the pending count per
// message (quadratic in the subject's size).
func (b *streamBodies) prefetch(js jetstream.JetStream, refs []session.Ref) error {
	by := map[string][]uint64{}
	for _, r := range refs {
		by[refStream(r)] = append(by[refStream(r)], refSeq(r))
	}
	for stream, seqs := range by {
		filter, ok := b.filters[stream]
		if !ok {
			continue
		}
		need := make(map[uint64]bool, len(seqs))
		for _, s := range seqs {
			need[s] = true
		}
		lo, hi := slices.Min(seqs), slices.Max(seqs)
		if err := b.read(js, stream, filter, max(1, lo-min(lo, maxChunks)), hi, need); err != nil {
			return err
		}
	}
	return nil
}

func (b *streamBodies) read(js jetstream.JetStream, stream, filter string, from, to uint64, need map[uint64]bool) error {
	ctx := b.ctx
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
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("projection: read bodies: %w", err)
	}
	defer it.Stop()
	asm := map[string]*eventlog.Assembler{}
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
		a := asm[subj]
		if a == nil {
			a = eventlog.NewAssembler(false)
			asm[subj] = a
		}
		if ev, err := a.Add(stream, subj, seq, msg.Headers(), msg.Data()); err == nil && ev != nil && ev.Op == "" && need[ev.Seq] {
			b.cache[makeRef(stream, ev.Seq)] = session.ToValidUTF8(ev.Raw)
		}
		if seq >= to || meta.NumPending == 0 {
			return nil
		}
	}
}
