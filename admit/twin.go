package admit

import (
	"context"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Every line this machine writes comes back from the hub under its own
// node id. A line of that id for a session this machine's own log does not
// hold was written by another machine running as this one (a cloned VM, a
// copied state dir): its sessions are never written here, since a line of
// this node's is taken for one that came from a file here. The other
// machine is told once, at its first contact with the hub
// (eventlog.Forwarder.checkOwnLines), but that check is the newcomer's:
// the first machine said nothing, and the sessions the other one wrote
// were missing here for good without a word (a probe, 2026-12-07). So the
// gate asks this machine's log, once a run for each session of its own id
// that comes back, whether it holds the session, and says so once, with
// the fix; status counts such sessions. The lines are admitted as before.

// OwnLog is this machine's own event log as the gate asks it.
type OwnLog interface {
	Last(ctx context.Context, sid string) (uint64, *eventlog.Event, error)
}

var _ OwnLog = (*eventlog.Local)(nil)

// WatchOwn has the gate look for sessions of this node id that log does
// not hold. Call it before the first Admit.
func (g *Gate) WatchOwn(log OwnLog) { g.ownLog = log }

// PutOffOwn has the gate put off its answer for a session the log does
// not hold until SettleOwn, called once the tailer has read the files here
// once: a state dir restored from an older copy holds a log without the
// sessions written since, which that first read publishes again from
// their files, and the machine was told that another machine ran as it,
// with the fix of a new node id and state dir (a probe, 2026-12-07).
func (g *Gate) PutOffOwn() { g.ownPutOff = true }

// maxOwnPending bounds the sessions whose answer is put off.
const maxOwnPending = 1024

// SettleOwn asks the log again about each session put off (PutOffOwn),
// and from then on answers at once. hasFile (nil: none) says whether a
// file here holds a session: one whose lines the first read found on the
// hub already is not published again, and is this machine's all the same
// (a twin's sessions are never written here).
func (g *Gate) SettleOwn(ctx context.Context, hasFile func(sid string) bool) {
	g.mu.Lock()
	pending := g.ownPending
	g.ownPending, g.ownPutOff, g.ownFile = nil, false, hasFile
	g.mu.Unlock()
	for _, sid := range pending {
		g.checkOwn(ctx, &eventlog.Event{SID: sid})
	}
}

// firstOwn reports whether the line of this node id of pair k is the
// first of the run, the one checkOwn asks about. Called with g.mu held.
func (g *Gate) firstOwn(k pair) bool {
	p := g.pair(k)
	if p == nil || p.ownChecked {
		return false
	}
	p.ownChecked = true
	return true
}

// checkOwn looks, for the first line of this node id of a session in this
// run (firstOwn), whether this machine's log holds the session.
func (g *Gate) checkOwn(ctx context.Context, ev *eventlog.Event) {
	g.mu.Lock()
	if g.ownPutOff {
		if len(g.ownPending) < maxOwnPending {
			g.ownPending = append(g.ownPending, ev.SID)
		}
		g.mu.Unlock()
		return
	}
	hasFile := g.ownFile
	g.mu.Unlock()
	seq, _, err := g.ownLog.Last(ctx, ev.SID)
	if err != nil {
		// Only a warning to give: the line is admitted either way.
		g.logger.Debug("admission: could not ask this machine's log for a session of its own node id", "session", ev.SID, "err", err)
		return
	}
	if seq > 0 {
		return
	}
	if hasFile != nil && hasFile(ev.SID) {
		return
	}
	g.mu.Lock()
	g.twins++
	first := g.twins == 1
	g.twinExample = ev.SID
	g.mu.Unlock()
	if first {
		g.logger.Error("the hub holds a session of this node id that this machine never wrote: another machine runs or ran as "+g.self+
			" (a cloned machine or a copied state dir); its sessions are not written here, and each machine misses the other's new sessions",
			"node", g.self, "session", ev.SID,
			"hint", "give one of the two machines an id of its own: pisyncd hub add-node NEW-ID on the hub, then on that machine PISYNC_NODE_ID=NEW-ID with a new state dir")
	}
}
