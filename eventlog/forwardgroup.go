package eventlog

import (
	"context"
	"fmt"
)

// Forwarding many sessions at once. A machine writing many sessions at
// once (an agent in each of several projects, a first read, a backlog
// after an outage) leaves PI_LOCAL interleaved: a window of 1,000 lines may
// hold a few lines each of 200 sessions. Sent a session at a time, each
// session's few lines were requests of their own, each a store and an
// fsync on the hub, waited for before the next, so the forwarder ran at
// the rate of single publishes whatever the hub could take. Now the
// sessions of a window go to the hub together, in atomic batches of many
// subjects, as the tailer's groups go to PI_LOCAL (Local.PublishGroups):
// every session's first message states the hub subject sequence it
// follows, so exactly once holds as it does a session at a time, and a
// batch is all or nothing.

// send is one session's part of a window: the lines to forward, as
// PI_LOCAL holds them (their SrcSeq is the position forwarded), and what
// goes to the hub for them (the same lines, or sealed).
type send struct {
	up    string // the hub subject
	lines []Line
	out   []Line
}

// sendAll forwards every session's part of a window, sessions together in
// batches as large as the hub takes (pack), and handles each outcome as
// sent does.
func (f *Forwarder) sendAll(ctx context.Context, sends []send, held map[string]bool) error {
	for len(sends) > 0 {
		n, worth := pack(sends)
		if err := f.sendGroup(ctx, sends[:n], worth, held); err != nil {
			return err
		}
		sends = sends[n:]
	}
	return nil
}

// pack returns how many of sends, from the first, fit in one atomic batch
// (at least one), and whether they are worth one: a batch costs the
// server a staged store, so a handful of single-chunk lines goes faster
// as single publishes (smallGroup).
func pack(sends []send) (n int, worth bool) {
	msgs, size, lines := 0, 0, 0
	for i := range sends {
		c, b := 0, 0
		for j := range sends[i].out {
			l := &sends[i].out[j]
			c, b = c+l.Chunks(), b+l.size()
		}
		if i > 0 && (msgs+c > MaxBatch || size+b > MaxBatchBytes) {
			return i, lines > smallGroup || msgs > lines
		}
		msgs, size, lines = msgs+c, size+b, lines+len(sends[i].out)
	}
	return len(sends), lines > smallGroup || msgs > lines
}

// sendGroup forwards group, the sessions pack found fit in one batch: as
// one batch when there are several, it is worth one and the hub takes
// batches; otherwise, or when the hub refused it, a session at a time.
func (f *Forwarder) sendGroup(ctx context.Context, group []send, worth bool, held map[string]bool) error {
	if len(group) > 1 && worth && !f.refusesBatches() {
		groups := make([]Group, len(group))
		for i := range group {
			// PublishGroups' sessions here are hub subjects (sameSubject).
			groups[i] = Group{SID: group[i].up, Last: f.up[group[i].up].hubSeq, Lines: group[i].out}
		}
		seqs, err := f.pub.publishGroups(ctx, sameSubject, groups)
		switch {
		case err == nil:
			f.batchTaken()
			for i := range group {
				if err := f.sent(&group[i], seqs[i], len(group[i].out), nil, held); err != nil {
					return err
				}
			}
			return nil
		case isBatchRefused(err):
			f.batchRefused(err) // and each session alone, below
		default:
			// Nothing was stored, or (a lost reply) all of it was: the
			// hub's positions are read again.
			for i := range group {
				delete(f.up, group[i].up)
			}
			if isShareFull(err) {
				return fmt.Errorf("forwarder: %d sessions: %w (%s)", len(group), err, shareFullHint)
			}
			return fmt.Errorf("forwarder: %d sessions: %w", len(group), err)
		}
	}
	for i := range group {
		s := &group[i]
		hubSeq, n, err := f.publish(ctx, s.up, f.up[s.up].hubSeq, s.out)
		if err := f.sent(s, hubSeq, n, err, held); err != nil {
			return err
		}
	}
	return nil
}

// sameSubject is the subject of a Group the forwarder sends: it names the
// hub subject itself.
func sameSubject(up string) string { return up }
