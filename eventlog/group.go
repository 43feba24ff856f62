package eventlog

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Group is one session's share of a PublishGroups call: its lines, to be
// stored after subject sequence Last (0: the subject must be empty).
type Group struct {
	SID   string
	Last  uint64
	Lines []Line
}

// Messages is how many messages g's lines take.
func (g *Group) Messages() int {
	n := 0
	for i := range g.Lines {
		n += g.Lines[i].Chunks()
	}
	return n
}

// PublishGroups stores the lines of several sessions in ONE atomic batch
// (ADR-50): one commit and one fsync of the stream for all of them, where
// a publish per session costs one each. Every session's first message
// carries its own expected last subject sequence, checked by the server as
// the batch is staged, so exactly-once per subject position holds as with
// Publish. All or nothing: on success it returns each group's new last
// subject sequence; on error nothing was stored, or (a lost reply) all
// was, and the caller must read the subjects again before it tries again.
// The groups must name distinct sessions and hold at most MaxBatch
// messages in all.
func (l *Local) PublishGroups(ctx context.Context, groups []Group) ([]uint64, error) {
	return l.pub.publishGroups(ctx, l.Subject, groups)
}

func (p *Publisher) publishGroups(ctx context.Context, subject func(string) string, groups []Group) ([]uint64, error) {
	total := 0
	for i := range groups {
		total += groups[i].Messages()
	}
	if total == 0 {
		return make([]uint64, len(groups)), nil
	}
	if total > MaxBatch {
		return nil, fmt.Errorf("eventlog: group of %d messages, more than a batch holds (%d)", total, MaxBatch)
	}
	msgs := make([]*nats.Msg, 0, total)
	ends := make([]int, len(groups)) // index of each group's last message
	for i := range groups {
		g := &groups[i]
		subj := subject(g.SID)
		first := len(msgs)
		for j := range g.Lines {
			msgs = append(msgs, g.Lines[j].messages(subj)...)
		}
		if len(msgs) > first {
			msgs[first].Header.Set(hdrExpLastSubj, strconv.FormatUint(g.Last, 10))
		}
		ends[i] = len(msgs) - 1
	}
	size := 0
	for _, m := range msgs {
		size += len(m.Data)
	}
	rctx, cancel, err := p.request(ctx, size)
	if err != nil {
		return nil, fmt.Errorf("eventlog: group of %d sessions: %w", len(groups), err)
	}
	defer cancel()
	seq, err := publishAtomic(rctx, p.nc, msgs, "", 0)
	if err != nil {
		return nil, suspectStore(p.suspect, ctx, fmt.Errorf("eventlog: group of %d sessions: %w", len(groups), cause(rctx, err)))
	}
	// The batch is stored contiguously: its first message is at
	// seq-len(msgs)+1. A subject's new last sequence is the stream
	// sequence of its last message.
	base := seq - uint64(len(msgs)) + 1
	out := make([]uint64, len(groups))
	for i := range groups {
		if len(groups[i].Lines) == 0 {
			out[i] = groups[i].Last
			continue
		}
		out[i] = base + uint64(ends[i])
	}
	return out, nil
}
