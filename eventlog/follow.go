package eventlog

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Follow reads every line subject of stream (PI_LOCAL or PI_ALL) after
// stream sequence after (0: from the start), through an ordered consumer
// that pulls at most maxBytes at a time: the way the views and the search
// index follow the streams. The caller stops the iterator.
func Follow(ctx context.Context, js jetstream.JetStream, stream string, after uint64, maxBytes int) (jetstream.MessagesContext, error) {
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
	it, err := cons.Messages(PullLimit(maxBytes))
	if err != nil {
		return nil, fmt.Errorf("consumer on %s: %w", stream, err)
	}
	return it, nil
}

// Handled is the last stream sequence a follower has handled, for others
// to wait on (an erase: its session is gone from what the follower keeps
// once the erase event is handled).
type Handled struct{ atomic.Uint64 }

// Wait returns once the follower has handled the message at seq, or with
// an error when ctx ends first.
func (h *Handled) Wait(ctx context.Context, seq uint64) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for h.Load() < seq {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for seq %d: %w", seq, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}
