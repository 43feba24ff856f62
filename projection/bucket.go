package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
)

// openBucket opens pi_proj, creating it on first use, republishing each
// value for the local listener's readers when live. Views are derived data
// (the streams rebuild them), so the bucket's stream is created here with
// the KV settings of ADR-8 plus persist_mode async, which drops the fsync
// from every write (research §5.2). Persist mode is fixed at creation and
// nats.go's UpdateKeyValue would rebuild the config without it, so the
// bucket is never updated through the KV API.
func openBucket(ctx context.Context, js jetstream.JetStream, live bool) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err == nil {
		if err := eventlog.SetLive(ctx, js, "KV_"+Bucket, live); err != nil {
			return nil, fmt.Errorf("projection: bucket: %w", err)
		}
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("projection: open bucket: %w", err)
	}
	cfg := bucketConfig()
	if live {
		cfg.RePublish = eventlog.LiveRePublish(cfg.Name)
	}
	_, err = js.CreateStream(ctx, cfg)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil, fmt.Errorf("projection: create bucket: %w", err)
	}
	kv, err = js.KeyValue(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("projection: open bucket: %w", err)
	}
	return kv, nil
}

func bucketConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              "KV_" + Bucket,
		Description:       "pisyncd: session projections (catalog, leaf, heads, context index)",
		Subjects:          []string{"$KV." + Bucket + ".>"},
		MaxMsgsPerSubject: 1,
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		Storage:           jetstream.FileStorage,
		Replicas:          1,
		AllowRollup:       true,
		DenyDelete:        true,
		Duplicates:        2 * time.Minute,
		AllowDirect:       true,
		Discard:           jetstream.DiscardNew,
		PersistMode:       jetstream.AsyncPersistMode,
	}
}

// kvSubject is the subject a value of key is stored under (what
// jetstream.KeyValue.Put publishes to, for a bucket that is neither a
// mirror nor in another domain).
func kvSubject(key string) string { return "$KV." + Bucket + "." + key }

// kvPipe is the values of one flush in flight: published, acks pending.
// A session's written hash is recorded at publish time; a value that is
// not acknowledged takes it back, so that the value is written again.
type kvPipe struct {
	puts []kvPut
}

type kvPut struct {
	s    *sessionState
	key  string
	slot int
	fut  jetstream.PubAckFuture
}

func (p *kvPipe) add(s *sessionState, key string, slot int, fut jetstream.PubAckFuture) {
	p.puts = append(p.puts, kvPut{s, key, slot, fut})
}

// wait waits for every ack; on the first failure it forgets what the
// failed and unanswered values were believed to be, and returns the error.
func (p *kvPipe) wait(ctx context.Context) error {
	// As long as a put on its own may take (jetstream's default request
	// timeout is 5 s) for the last of them: a store that stopped
	// answering fails the flush, as it failed a put.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i, put := range p.puts {
		select {
		case <-put.fut.Ok():
		case err := <-put.fut.Err():
			p.puts = p.puts[i:]
			p.abandon()
			return fmt.Errorf("projection: write %s: %w", put.key, err)
		case <-ctx.Done():
			p.puts = p.puts[i:]
			p.abandon()
			return fmt.Errorf("projection: write %s: %w", put.key, context.Cause(ctx))
		}
	}
	p.puts = nil
	return nil
}

// abandon forgets the values of the puts left: their writes may not have
// happened.
func (p *kvPipe) abandon() {
	for _, put := range p.puts {
		put.s.mu.Lock()
		put.s.written.forget(put.slot)
		put.s.mu.Unlock()
	}
	p.puts = nil
}
