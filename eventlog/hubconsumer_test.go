package eventlog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestHubConsumerStopsAtAGap: the downloader's consumer on PI_HUB has the
// fixed name the hub allows its node (dl_<node>, from the connection's
// inbox prefix) and, like the ordered consumer it replaces, hands over
// messages in order with none missing. When a message never arrives (here
// someone else takes it first, as a link that drops mid-pull would lose
// it), nothing after it is handed over, the consumer is deleted on the
// hub, and the error handler hears of it, so the downloader starts over
// from PI_ALL instead of copying past the hole.
func TestHubConsumerStopsAtAGap(t *testing.T) {
	hubJS, ws, _ := hubAndLeaf(t)
	ctx := context.Background()
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), 0, mkLines(5, 10, "a")); err != nil {
		t.Fatal(err)
	}
	nc, err := ws.Connect(nats.CustomInboxPrefix(eventlog.NodeInboxPrefix("w1")))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hub, _ := jetstream.NewWithDomain(nc, embedded.HubDomain)
	consume := func(steal bool) (got chan uint64, errs chan error, stop func()) {
		t.Helper()
		cons, err := eventlog.OpenHubConsumer(ctx, nc, hub, jetstream.OrderedConsumerConfig{InactiveThreshold: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if name := cons.CachedInfo().Name; name != "dl_w1" {
			t.Fatalf("consumer name %q, want dl_w1", name)
		}
		if steal {
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for range batch.Messages() {
			}
		}
		got, errs = make(chan uint64, 10), make(chan error, 10)
		cc, err := cons.Consume(func(m jetstream.Msg) {
			meta, _ := m.Metadata()
			got <- meta.Sequence.Stream
		}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		return got, errs, cc.Stop
	}

	got, _, stop0 := consume(false)
	for want := uint64(1); want <= 5; want++ {
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("handed over stream sequence %d, want %d", s, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d not handed over", want)
		}
	}
	stop0()

	got, errs, stop := consume(true) // replaces the first consumer: same name
	defer stop()
	select {
	case err := <-errs:
		t.Logf("after the gap: %v", err)
	case s := <-got:
		t.Fatalf("handed over stream sequence %d after a gap", s)
	case <-time.After(20 * time.Second):
		t.Fatal("no error reported after a gap")
	}
	select {
	case s := <-got:
		t.Fatalf("handed over stream sequence %d after a gap", s)
	default:
	}
	if _, err := hubJS.Consumer(ctx, eventlog.HubStream, "dl_w1"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the consumer is still on the hub after a gap: %v", err)
	}
}
