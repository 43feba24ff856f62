package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/jstest"
)

// TestFollowerFillsGaps: against a real embedded server and PI_LOCAL as
// the daemon makes it, through the listener. A live message past the
// next sequence has the gap read first; one already had (another reader
// may send a stored message on this subject again) is skipped; a gap of
// erased messages is passed over; a message's subject is the one its
// headers name, not the one it came on.
func TestFollowerFillsGaps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, js := jstest.Start(t, embedded.Config{NodeID: "n", Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	relay, err := srv.OpenReadRelay(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	relayed := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	go func() { relayed <- relay.Run(rctx) }()
	defer func() {
		stop()
		if err := <-relayed; err != nil {
			t.Errorf("read relay: %v", err)
		}
	}()
	cfg := eventlog.LocalStreamConfig()
	cfg.RePublish = eventlog.LiveRePublish(eventlog.LocalStream) // as a daemon with a listener has it
	stream, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 7; i++ {
		if _, err := js.Publish(ctx, "pi.evt.n.s", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.DeleteMsg(ctx, 6); err != nil { // erased
		t.Fatal(err)
	}

	nc, err := connect(srv.CredentialsFile(), func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	f := &follower{nc: nc, stream: "PI_LOCAL", filter: "pi.evt.>", next: 1}
	var got []string
	hand := func(m *nats.Msg) { got = append(got, m.Subject+"="+string(m.Data)) }
	live := func(seq int) *nats.Msg {
		// On another subject, as another reader may send a stored
		// message: the headers say which it is.
		return &nats.Msg{Subject: "pi.evt.n.elsewhere", Data: fmt.Appendf(nil, "%d", seq),
			Header: nats.Header{"Nats-Sequence": []string{fmt.Sprint(seq)}, "Nats-Stream": []string{"PI_LOCAL"}, "Nats-Subject": []string{"pi.evt.n.s"}}}
	}
	for _, seq := range []int{4, 2, 7, 7, 3} {
		if err := f.live(ctx, live(seq), hand); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"pi.evt.n.s=1", "pi.evt.n.s=2", "pi.evt.n.s=3", "pi.evt.n.s=4", "pi.evt.n.s=5", "pi.evt.n.s=7"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handed %v, want %v", got, want)
	}
	if last, subj, err := f.last(); err != nil || last != 7 || subj != "pi.evt.n.s" {
		t.Errorf("last = %d %q %v, want 7 pi.evt.n.s", last, subj, err)
	}
	// A catch-up (after a reconnect) reads up to the stream's last
	// message with no live message to show the gap; a position past the
	// end (a wiped store) is refused, not taken as "had already".
	again := &follower{nc: nc, stream: "PI_LOCAL", filter: "pi.evt.>", next: 3}
	got = nil
	if err := again.catchUp(ctx, hand); err != nil || fmt.Sprint(got) != fmt.Sprint(want[2:]) || again.next != 8 {
		t.Errorf("catch-up from 3: %v, next %d, %v; want %v, next 8", got, again.next, err, want[2:])
	}
	ahead := &follower{nc: nc, stream: "PI_LOCAL", filter: "pi.evt.>", next: 99}
	if err := ahead.catchUp(ctx, hand); !errors.Is(err, errAhead) {
		t.Errorf("catch-up from 99 of a stream ending at 7: %v, want errAhead", err)
	}
	all := &follower{nc: nc, stream: "PI_ALL", filter: "pi.all.>"}
	if last, _, err := all.last(); err != nil || last != 0 {
		t.Errorf("PI_ALL without a hub: %d %v, want it empty", last, err)
	}
}
