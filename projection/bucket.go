package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// openBucket opens pi_proj, creating it on first use. Views are derived
// data (the streams rebuild them), so the bucket's stream is created here
// with the KV settings of ADR-8 plus persist_mode async, which drops the
// fsync from every write (research §5.2). Persist mode is fixed at creation
// and nats.go's UpdateKeyValue would rebuild the config without it, so the
// bucket is never updated through the KV API.
func openBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("projection: open bucket: %w", err)
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
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
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil, fmt.Errorf("projection: create bucket: %w", err)
	}
	kv, err = js.KeyValue(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("projection: open bucket: %w", err)
	}
	return kv, nil
}
