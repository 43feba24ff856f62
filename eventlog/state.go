package eventlog

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// StateBucket holds the read positions of the forwarder and the
// replicator. They are hints for where to start reading: the hub and the
// files are the truth, so a lost or stale position costs a re-check, never
// a duplicate.
const StateBucket = "pi_state"

// OpenState creates or opens the state bucket.
func OpenState(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      StateBucket,
		Description: "pisyncd: read positions of the forwarder and the replicator",
		Storage:     jetstream.FileStorage,
		History:     1,
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: state bucket: %w", err)
	}
	return kv, nil
}

// All is a workstation's PI_ALL: every node's events, copied from the hub.
type All struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

// OpenAll makes sure PI_ALL exists. A PI_ALL left by an older pisyncd as a
// native mirror is replaced: it holds only derived data.
func OpenAll(ctx context.Context, js jetstream.JetStream) (*All, error) {
	if s, err := js.Stream(ctx, AllStream); err == nil && s.CachedInfo().Config.Mirror != nil {
		if err := js.DeleteStream(ctx, AllStream); err != nil {
			return nil, fmt.Errorf("eventlog: replace mirror %s: %w", AllStream, err)
		}
	}
	s, err := EnsureStream(ctx, js, AllStreamConfig())
	if err != nil {
		return nil, err
	}
	return &All{js: js, stream: s}, nil
}

// Stream returns PI_ALL.
func (a *All) Stream() jetstream.Stream { return a.stream }

// JetStream returns the local JetStream context.
func (a *All) JetStream() jetstream.JetStream { return a.js }

// SessionFilter is the PI_ALL subject filter of one session on every node.
func SessionFilter(sid string) string { return AllPrefix + ".*." + EncodeSID(sid) }

// ScanSession calls fn for every event of the session in PI_ALL, from every
// node, in stream order, up to the stream's last sequence when called.
func (a *All) ScanSession(ctx context.Context, sid string, withData bool, fn func(*Event) error) error {
	info, err := a.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("eventlog: %s info: %w", AllStream, err)
	}
	if info.State.LastSeq == 0 {
		return nil
	}
	return ReadFiltered(ctx, a.js, AllStream, SessionFilter(sid), info.State.LastSeq, !withData, fn)
}
