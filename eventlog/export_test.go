package eventlog

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

// OpenHubConsumer exposes the downloader's consumer to the package's
// external tests.
var OpenHubConsumer = openHubConsumer

// SnapshotStream exposes the upgrade's first step, so that tests can cut
// an upgrade short where a crash would.
var SnapshotStream = snapshotStream

// SealLine exposes the forwarder's sealing: a line of session sid sealed
// by c, its key message published with kh.
func SealLine(c *Crypt, sid string, l *Line, kh KeyHub) (string, Line, error) {
	return c.seal(sid, l, kh)
}

// SealLineV1 seals line l of node's session sid in a version 1 envelope
// (its data key wrapped in it), as pisyncd sealed before version 2.
func SealLineV1(r *keyring.Ring, node, sid string, l *Line) (string, Line) {
	tok, envs := seal.NewSealer(r, node).Seal(sid, l.SrcSeq, innerPlain(sid, l), MaxChunk)
	return UpPrefix + "." + node + "." + tok, Line{SrcSeq: l.SrcSeq, sealed: envs}
}

// EraseKeysNow runs the forwarder's tombstoning of tok's key messages once.
func EraseKeysNow(c *Crypt, tok string, kh KeyHub) error { return c.eraseKeys(tok, kh) }

// KeyErasures lists the tokens whose key messages are owed tombstones.
func KeyErasures(c *Crypt) []string { toks, _ := c.keyErasures(); return toks }

// PumpQueue reports how many times p's callback waited for room in its
// queue, and the messages and payload bytes the queue holds.
func PumpQueue(p *Pump) (waits, msgs, bytes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waits, len(p.ch), p.queued
}

// SetParkBounds sets how many sessions a node may have held, how many
// bytes PI_PARK may hold, and how many of them one node's lines may take,
// until the test ends.
func SetParkBounds(t interface{ Cleanup(func()) }, perNode int, bytes, nodeBytes uint64) {
	was, wasBytes, wasNode := maxHeldPerNode, parkMaxBytes, parkNodeBytes
	maxHeldPerNode, parkMaxBytes, parkNodeBytes = perNode, bytes, nodeBytes
	t.Cleanup(func() { maxHeldPerNode, parkMaxBytes, parkNodeBytes = was, wasBytes, wasNode })
}

// HubSubject is the hub subject c gives node's session sid, and whether
// its lines are sealed.
func HubSubject(c *Crypt, sid string) (string, bool, error) {
	up, tok, err := c.subject(sid)
	return up, tok != "", err
}

// Rewound exposes the check of a hub mark: the mark of hub message seq
// (node's line at src, stored at time, Unix nanoseconds; 0: not known).
func Rewound(ctx context.Context, hub jetstream.JetStream, seq uint64, node string, src uint64, time int64) (string, error) {
	return rewound(ctx, hub, hubMark{seq: seq, node: node, src: src, time: time})
}

// CheckConsumer runs the downloader's check of its silent consumer once.
func CheckConsumer(d *Downloader, ctx context.Context, cons jetstream.Consumer, handled uint64) error {
	return d.checkConsumer(ctx, cons, handled, stallAfter)
}
