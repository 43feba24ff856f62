package web

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/projection"
)

// panickySource panics in its first Snapshot (net/http recovers a
// handler's panic and goes on serving) and reads an empty session after.
type panickySource struct {
	Source
	calls atomic.Int64
}

func (p *panickySource) Snapshot(context.Context, string, int64) (*projection.Snapshot, error) {
	if p.calls.Add(1) == 1 {
		panic("snapshot")
	}
	return &projection.Snapshot{}, nil
}

// TestReadAfterPanickedRead: a read of a session that panicked is not
// left under way, so the session's next request reads it rather than
// wait for a read that never ends.
func TestReadAfterPanickedRead(t *testing.T) {
	src := &panickySource{}
	s, err := New(Options{Token: testToken, Source: src, Node: testNode})
	if err != nil {
		t.Fatal(err)
	}
	const sid = "panic000-0000-7000-8000-000000000000"
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the first read did not panic")
			}
		}()
		s.read(context.Background(), sid)
	}()
	// A deadline only so that a failure ends: the read waits for
	// nothing now.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := s.read(ctx, sid)
	if err != nil || snap == nil {
		t.Fatalf("read after a panicked read: %v (%d reads)", err, src.calls.Load())
	}
}
