package eventlog_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/jstest"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestPumpBoundsBytes: a pump of messages as large as a line's chunks
// holds at most its bytes, queued and in what one call takes, however many
// messages it may hold: bounded by count alone, the forwarder's queue and
// window each took up to 1,024 chunks of 256 KiB, past the daemon's memory
// budget on a backlog of images.
func TestPumpBoundsBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, js := jstest.Start(t, embedded.Config{})
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}}); err != nil {
		t.Fatal(err)
	}
	const chunk, n, maxBytes = eventlog.MaxChunk, 40, 1 << 20
	for i := range n {
		if _, err := js.Publish(ctx, "p.x", bytes.Repeat([]byte{'a' + byte(i%26)}, chunk)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.OrderedConsumer(ctx, "P", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := eventlog.NewPump(cons, 1024, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()

	batch, err := p.Next(ctx, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := maxBytes / chunk; len(batch) != want {
		t.Errorf("one call took %d messages of %d KiB; want %d (%d KiB)", len(batch), chunk>>10, want, maxBytes>>10)
	}
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		waits, msgs, queued := eventlog.PumpQueue(p)
		return waits > 0, fmt.Sprintf("the callback has not waited for room: %d messages, %d bytes queued", msgs, queued)
	})
	if _, msgs, queued := eventlog.PumpQueue(p); msgs*chunk > maxBytes || queued > maxBytes {
		t.Errorf("the queue holds %d messages, %d bytes by its count; want at most %d bytes", msgs, queued, maxBytes)
	}
	// Everything still comes, in order, as the reader takes it.
	got := 0
	for {
		for _, m := range batch {
			if m.Data()[0] != 'a'+byte(got%26) {
				t.Fatalf("message %d out of order", got)
			}
			got++
		}
		if got >= n {
			break
		}
		if batch, err = p.Next(ctx, 1000, nil); err != nil {
			t.Fatalf("after %d of %d messages: %v", got, n, err)
		}
	}
}
