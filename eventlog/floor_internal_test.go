package eventlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

type countAdmit struct{ rejected map[string]int }

func (c *countAdmit) Admit(context.Context, *Event, time.Time) error { return nil }
func (c *countAdmit) Reject(node, sid, reason, detail string)        { c.rejected[reason]++ }
func (c *countAdmit) ErasedLines(node, sid string)                   {}

// TestFloorNotRaisedBySkippedErase: after the hub's store was replaced,
// every forwarder sends its history again, sealed under data keys drawn
// on the new hub. n3's erase event of s1, sent again after n2 resealed
// s1's later lines (handle 3), names a newer key message (handle 10); it
// is passed over (PI_ALL holds it). n2's next line of s1, still under
// handle 3 (n2 had applied the erase long ago, on the old hub), must be
// admitted, not refused as erased.
func TestFloorNotRaisedBySkippedErase(t *testing.T) {
	a := &countAdmit{rejected: map[string]int{}}
	d := &Downloader{opts: DownloaderOptions{Admit: a}, rebuilt: 100}
	f := &framer{d: d,
		held:  map[pair]uint64{{"n3", "s1"}: 2, {"n2", "s1"}: 7},
		floor: map[string]uint64{"s1": 0},
	}
	meta := &jetstream.MsgMetadata{}
	ctx := context.Background()
	// n3's erase event again, PI_ALL holds it: passed over.
	if ok, err := f.admit(ctx, &Event{Node: "n3", SID: "s1", SrcSeq: 2, Op: OpErase}, meta, true, 10); ok || err != nil {
		t.Fatalf("erase again: %v %v", ok, err)
	}
	// n2's new line of s1, sealed with the data key it drew on the new hub.
	ok, err := f.admit(ctx, &Event{Node: "n2", SID: "s1", SrcSeq: 8}, meta, true, 3)
	if err != nil || !ok {
		t.Fatalf("n2's new line refused: %v %v, rejections %v", ok, err, a.rejected)
	}
}

type refuseErase struct{ countAdmit }

func (r *refuseErase) Admit(_ context.Context, ev *Event, _ time.Time) error {
	if ev.Op == OpErase {
		return fmt.Errorf("no authority: %w", ErrRejected)
	}
	return nil
}

// TestFloorNotRaisedByRefusedErase: an erase event the admission point
// refuses (from a node with no say over the session: it never wrote it,
// or PISYNC_TRUSTED_NODES leaves it out) erases nothing here, and the
// session's origin, which refused it too, goes on under its data key:
// its next line must be admitted, not refused as erased.
func TestFloorNotRaisedByRefusedErase(t *testing.T) {
	a := &refuseErase{countAdmit{rejected: map[string]int{}}}
	d := &Downloader{opts: DownloaderOptions{Admit: a}}
	f := &framer{d: d, held: map[pair]uint64{{"eve", "s1"}: 0, {"n2", "s1"}: 7}, floor: map[string]uint64{"s1": 0}}
	meta := &jetstream.MsgMetadata{}
	ctx := context.Background()
	if ok, err := f.admit(ctx, &Event{Node: "eve", SID: "s1", SrcSeq: 1, Op: OpErase}, meta, true, 10); ok || err != nil {
		t.Fatalf("eve's erase: %v %v", ok, err)
	}
	if ok, err := f.admit(ctx, &Event{Node: "n2", SID: "s1", SrcSeq: 8}, meta, true, 3); err != nil || !ok {
		t.Fatalf("n2's next line refused: %v %v, rejections %v", ok, err, a.rejected)
	}
}
