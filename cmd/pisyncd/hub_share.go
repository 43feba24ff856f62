package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// shareWatch warns when a team's share of the hub's store is nearly full.
// The share is the team's, not each node's, so one node can fill it for
// all, and a full share refuses every node's next line: the operator
// hears of it before, with the way to find the node (`hub usage`).
type shareWatch struct {
	srv    *embedded.Server
	logger *slog.Logger
	every  time.Duration
}

// shareWatchEvery is how often the hub looks at the teams' shares.
const shareWatchEvery = 30 * time.Second

// Thresholds of a share's use: warned at or above full, told it has room
// again below room (apart, so a share near one line does not flap).
const shareFullPercent, shareRoomPercent = 90, 80

// Run looks at every team's use once every w.every until ctx ends.
// Cancellation is not an error.
func (w *shareWatch) Run(ctx context.Context) error {
	warned := map[string]bool{}
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		for _, team := range teams(w.srv) {
			w.check(ctx, team, warned)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// check looks at one team's share and says so when it crosses a threshold.
func (w *shareWatch) check(ctx context.Context, team string, warned map[string]bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var used, limit int64
	err := withTeam(w.srv, team, func(nc *nats.Conn) error {
		js, err := jetstream.New(nc)
		if err == nil {
			used, limit, err = teamStore(ctx, js)
		}
		return err
	})
	if err != nil || limit <= 0 {
		w.logger.Debug("share watch: no share to look at", "team", team, "err", err)
		return // a hub without shares, or a moment it does not answer: the next look
	}
	switch percent := used * 100 / limit; {
	case percent >= shareFullPercent && !warned[team]:
		warned[team] = true
		attrs := []any{"team", team, "used", byteCount(used), "share", byteCount(limit), "percent", percent}
		if node, held, ok := w.largest(ctx, team); ok {
			attrs = append(attrs, "largest_node", node, "largest_node_holds", byteCount(held))
		}
		// Lines are refused before the share is full: one that does not
		// fit in what is left ("once full" read as nothing refused yet).
		w.logger.Warn("a team's share of the hub's store is nearly full: a line of its nodes that does not fit in what is left is refused now, and every line once it is full", append(attrs,
			"hint", "`pisyncd hub usage` shows what each node holds; raise PISYNC_HUB_TEAM_MAX_STORE, or remove a node that filled it: `pisyncd hub remove-node NODE --erase` (docs/HUB.md)")...)
	case percent < shareRoomPercent && warned[team]:
		delete(warned, team)
		w.logger.Info("a team's share of the hub's store has room again", "team", team, "used", byteCount(used), "share", byteCount(limit), "percent", percent)
	}
}

// largest names the node holding the most of team's share, read once as the
// share crosses its threshold (a pass over PI_HUB's headers: `hub usage`).
// Not known when the pass fails: the warning goes without it.
func (w *shareWatch) largest(ctx context.Context, team string) (node string, held int64, ok bool) {
	var usage map[string]eventlog.NodeUsage
	err := withTeam(w.srv, team, func(nc *nats.Conn) error {
		js, err := jetstream.New(nc)
		if err == nil {
			usage, err = eventlog.HubUsage(ctx, js)
		}
		return err
	})
	if err != nil {
		w.logger.Debug("share watch: what each node holds not read", "team", team, "err", err)
		return "", 0, false
	}
	for n, u := range usage {
		if u.Bytes > held || (u.Bytes == held && n < node) {
			node, held, ok = n, u.Bytes, true
		}
	}
	return node, held, ok
}
