package eventlog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestFollowBusyReaderLosesNothing: a follower whose reader is busy for
// longer than three of the server's idle heartbeats, while the consumer's
// pull is delivered but for one message, gets every message in order and
// no "slow consumer" drop. With jetstream's Messages iterator (what Follow
// used) the heartbeats filled its channel, exactly one pull long, and
// nats.go dropped the next one (seen in TestSIGKILLReplication under
// load, from the projection's and the search index's followers).
func TestFollowBusyReaderLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for three idle heartbeats (15 s)")
	}
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Config{StateDir: t.TempDir(), NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	asyncErrs := make(chan error, 16)
	nc, err := srv.Connect(nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		select {
		case asyncErrs <- fmt.Errorf("subscription %s: %w", sub.Subject, err):
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	lg, err := eventlog.OpenLocal(ctx, nc, "n1")
	if err != nil {
		t.Fatal(err)
	}
	// One message fewer than a pull asks for (1024): the pull stays
	// open, and the server sends it a heartbeat every 5 s while idle.
	const n = 1023
	lines := mkLines(n, 10, "e")
	var last uint64
	for i := 0; i < n; i += 500 {
		if last, _, err = lg.Publish(ctx, "s1", last, lines[i:min(i+500, n)]); err != nil {
			t.Fatal(err)
		}
	}
	f, err := eventlog.Follow(ctx, lg.JetStream(), eventlog.LocalStream, 0, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	next := func() (jetstream.Msg, error) {
		nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return f.Next(nctx)
	}
	// The first message (Messages pulled only at the first Next), then
	// a busy reader: nothing taken while three heartbeats come (the
	// queue holds the other 1022 messages), and a drop is reported then.
	if _, err := next(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-asyncErrs:
		t.Fatalf("while the reader was busy: %v", err)
	case <-time.After(17 * time.Second):
	}
	for i := 2; i <= n; i++ {
		m, err := next()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if meta, _ := m.Metadata(); meta.Sequence.Stream != uint64(i) {
			t.Fatalf("message %d has stream sequence %d", i, meta.Sequence.Stream)
		}
	}
	// The follower goes on with what comes next.
	if _, _, err := lg.Publish(ctx, "s1", last, mkLines(1, 10, "late")); err != nil {
		t.Fatal(err)
	}
	if m, err := next(); err != nil {
		t.Fatalf("after the busy spell: %v", err)
	} else if meta, _ := m.Metadata(); meta.Sequence.Stream != n+1 {
		t.Fatalf("after the busy spell: stream sequence %d, want %d", meta.Sequence.Stream, n+1)
	}
	select {
	case err := <-asyncErrs:
		t.Fatal(err)
	default:
	}
}
