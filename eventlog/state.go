package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// All is a workstation's PI_ALL: every node's events, mirrored from the hub.
type All struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

// OpenAll makes sure the PI_ALL mirror of the hub's PI_HUB exists.
func OpenAll(ctx context.Context, js jetstream.JetStream, hubDomain string) (*All, error) {
	s, err := EnsureStream(ctx, js, AllStreamConfig(hubDomain))
	if err != nil {
		return nil, err
	}
	return &All{js: js, stream: s}, nil
}

// LookupAll opens an existing PI_ALL, or returns nil when there is none
// yet. PI_ALL is created only once the hub answers (WaitHubAndOpenAll): a
// mirror whose first attempts fail backs off for up to two minutes.
func LookupAll(ctx context.Context, js jetstream.JetStream) (*All, error) {
	s, err := js.Stream(ctx, AllStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog: %s: %w", AllStream, err)
	}
	return &All{js: js, stream: s}, nil
}

// WaitHubAndOpenAll waits until the hub's PI_HUB answers through the leaf
// connection, then creates (or opens) PI_ALL.
func WaitHubAndOpenAll(ctx context.Context, js, hub jetstream.JetStream, hubDomain string) (*All, error) {
	backoff := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := hub.Stream(cctx, HubStream)
		cancel()
		if err == nil {
			return OpenAll(ctx, js, hubDomain)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// Stream returns PI_ALL.
func (a *All) Stream() jetstream.Stream { return a.stream }

// JetStream returns the local JetStream context.
func (a *All) JetStream() jetstream.JetStream { return a.js }

// SessionFilter is the PI_ALL subject filter of one session on every node.
func SessionFilter(sid string) string { return UpPrefix + ".*." + EncodeSID(sid) }

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
