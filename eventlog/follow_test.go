package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestFollowBusyReaderLosesNothing: a follower whose reader is busy for
// longer than three of the server's idle heartbeats (a second each), while
// the consumer's pull is delivered but for one message, gets every message
// in order and no "slow consumer" drop. With jetstream's Messages iterator (what Follow
// used) the heartbeats filled its channel, exactly one pull long, and
// nats.go dropped the next one (seen in TestSIGKILLReplication under
// load, from the projection's and the search index's followers).
func TestFollowBusyReaderLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for three idle heartbeats (4 s)")
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
	// open, and the server sends it a heartbeat every second while idle.
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
	case <-time.After(4 * time.Second):
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

// TestFollowRecoversLostPull: when the server ends a follower's pull
// without telling it, the follower still gets every message, in order, a
// few heartbeats later. nats.go counts a pull's messages as still to come
// until a status says otherwise, and pulls again only below half of them:
// a pull gone unannounced is found by its missing heartbeats alone. The
// daemon met one in about 25 first reads (the server held no pull with
// 45,000 messages undelivered) and its views waited two default
// heartbeats, 10 s.
//
// The server ends a pull that way when its bytes run out exactly at a
// message (it delivers it as the last, with no status after): here the
// pull's limit is the exact size of the first k messages on the wire, k
// well under half a pull, so the client keeps waiting for the rest.
func TestFollowRecoversLostPull(t *testing.T) {
	ctx := context.Background()
	lg := openLog(t)
	js := lg.JetStream()
	// Messages without headers: a message's size on the wire is then its
	// subject, its reply subject (the ack subject, the same length for
	// any ordered consumer reading from the start) and its data.
	const n, k = 40, 10
	for i := range n {
		if _, err := js.Publish(ctx, lg.Subject("s1"), fmt.Appendf(nil, `{"i":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	follow := func(maxBytes int) *eventlog.Follower {
		f, err := eventlog.Follow(ctx, js, eventlog.LocalStream, 0, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// Within four of nats.go's own recoveries at the heartbeat the
	// follower asks for; at its default for ordered consumers (5 s, a
	// recovery after 10 s) this fails.
	next := func(f *eventlog.Follower) jetstream.Msg {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		defer cancel()
		m, err := f.Next(nctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	f := follow(8 << 20)
	limit := 0
	for range k {
		m := next(f)
		limit += len(m.Subject()) + len(m.Reply()) + len(m.Data())
	}
	f.Stop()

	f = follow(limit)
	defer f.Stop()
	for i := range n {
		m := next(f)
		if meta, _ := m.Metadata(); meta.Sequence.Stream != uint64(i+1) {
			t.Fatalf("message %d has stream sequence %d", i+1, meta.Sequence.Stream)
		}
		if i+1 == k {
			// The state the daemon was found in: no pull held, the
			// rest undelivered. Otherwise this test tests nothing.
			st, err := js.Stream(ctx, eventlog.LocalStream)
			if err != nil {
				t.Fatal(err)
			}
			var this *jetstream.ConsumerInfo // the first follower's is there too, until it idles out
			for ci := range st.ListConsumers(ctx).Info() {
				if ci.Delivered.Stream == k {
					this = ci
				}
			}
			if this == nil || this.NumWaiting != 0 || this.NumPending != n-k {
				t.Fatalf("after %d messages: consumer %+v, want one holding no pull with %d pending", k, this, n-k)
			}
		}
	}
}

// TestHandledWait: a waiter sleeps until the sequence it waits for is
// stored (no timer wakes it meanwhile), and ends with its context.
func TestHandledWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h eventlog.Handled
		h.Store(2)
		if err := h.Wait(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- h.Wait(t.Context(), 5) }()
		synctest.Wait()
		h.Store(3)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("returned at 3 of 5: %v", err)
		default:
		}
		h.Advance(5)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		h.Advance(4)
		if got := h.Load(); got != 5 {
			t.Fatalf("Advance(4) after 5: %d", got)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() { done <- h.Wait(ctx, 9) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("after cancel: %v", err)
		}
	})
}

// TestFollowersLeaveNoConsumers: a follower stopped leaves no consumer on
// the server. Each tail and each web page's live stream is one; left for
// nats.go's five minutes, the thousand-and-first within them was refused
// ("maximum consumers limit reached"), and so was every consumer the
// daemon made on the stream then (a probe, 2026-12-07).
func TestFollowersLeaveNoConsumers(t *testing.T) {
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Config{StateDir: t.TempDir(), NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	lg, err := eventlog.OpenLocal(ctx, nc, "n1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1100 {
		f, err := eventlog.Follow(ctx, lg.JetStream(), eventlog.LocalStream, 0, 8<<20)
		if err != nil {
			t.Fatalf("follower %d: %v", i+1, err)
		}
		f.Stop()
	}
	s, err := lg.JetStream().Stream(ctx, eventlog.LocalStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Consumers; n != 0 {
		t.Errorf("%s has %d consumers after 1,100 followers stopped", eventlog.LocalStream, n)
	}
}
