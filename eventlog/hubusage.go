package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// NodeUsage is what one node holds on the hub's PI_HUB.
type NodeUsage struct {
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"` // payloads, as stored (sealed lines: their envelopes)
	Sessions int   `json:"sessions"`
}

// HubUsage reads what each node holds on PI_HUB (js: the hub's JetStream in
// one team's account): which node filled the team's share. It reads every
// message's headers once, not its payload (the server gives each one's
// size), so it costs a pass over the stream's headers.
//
// Its consumer counts against the team's consumers (PISYNC_HUB_TEAM_MAX_CONSUMERS:
// its nodes + 8) and is removed as it returns: left to nats.go's inactive
// threshold of five minutes, nine `hub usage` in five minutes (a `watch`)
// filled the team's share, and a workstation starting then could not make
// the consumer it copies from. It is one plain consumer: an ordered one
// makes a new consumer at each Fetch and deletes the one before in the
// background, so one was still there after the call returned (under
// load, TestHubUsage), and a stream of a million lines made a thousand.
func HubUsage(ctx context.Context, js jetstream.JetStream) (map[string]NodeUsage, error) {
	cons, err := js.CreateConsumer(ctx, HubStream, jetstream.ConsumerConfig{
		FilterSubjects: []string{UpPrefix + ".>"}, HeadersOnly: true,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true,
		// Should the process die before the deletion below.
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: hub usage: %w", err)
	}
	defer deleteConsumer(js, HubStream, cons)
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("eventlog: hub usage: %w", err)
	}
	usage := map[string]NodeUsage{}
	sessions := map[string]bool{}
	for left := info.NumPending; left > 0; {
		batch, err := cons.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			return nil, fmt.Errorf("eventlog: hub usage: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if meta, err := m.Metadata(); err == nil {
				left = meta.NumPending // messages erased meanwhile are not waited for
			}
			subj := m.Subject()
			node, _, ok := strings.Cut(strings.TrimPrefix(subj, UpPrefix+"."), ".")
			if !ok {
				continue
			}
			u := usage[node]
			u.Messages++
			size, _ := strconv.ParseInt(m.Headers().Get(hdrMsgSize), 10, 64)
			u.Bytes += size
			if !sessions[subj] {
				sessions[subj] = true
				u.Sessions++
			}
			usage[node] = u
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("eventlog: hub usage: %w", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("eventlog: hub usage: %s sent nothing in 10 s with %d messages to go", HubStream, left)
		}
	}
	return usage, nil
}

// hdrMsgSize is the payload's size the server adds to a message it
// delivers without its payload (a headers-only consumer).
const hdrMsgSize = "Nats-Msg-Size"
