package eventlog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestForwarderHoldsALineWaitingForABatch: while another node holds every
// atomic batch PI_HUB may have open (nats-server's limit, for all nodes
// together), a session whose line needs a batch (an image) is held, and the
// forwarder reads on past it: a session of more lines than its window
// (1,000 messages), written after the image, reaches the hub in full, the
// image does not, the forwarder counts one session waiting, and forwarding
// is never reported paused. Before, the
// forwarder read the window holding the image again and again, and the
// lines beyond it waited with the image.
func TestForwarderHoldsALineWaitingForABatch(t *testing.T) {
	hubJS, ws, _ := hubAndLeafThrough(t, func(leaf string) string { return leaf })
	ctx := context.Background()
	holdEveryBatch(t, hubJS)

	nc, local := localOn(t, ws, "w1")
	if _, _, err := local.Publish(ctx, "s1", 0, []eventlog.Line{imageLine("img0", 0, 200<<10)}); err != nil {
		t.Fatal(err)
	}
	const n = 1100
	lines := make([]eventlog.Line, n)
	for i := range lines {
		id := fmt.Sprintf("m%04d", i)
		lines[i] = eventlog.NewLine(fmt.Appendf(nil, `{"type":"message","id":%q}`, id), id, "", "message", "g.jsonl", int64(i))
	}
	if _, _, err := local.Publish(ctx, "s2", 0, lines); err != nil {
		t.Fatal(err)
	}
	f, logs := runWatchingForwarder(t, ws, nc, local)
	hub, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	onHub := func(sid string) uint64 {
		subj := eventlog.UpSubject("w1", sid)
		info, err := hub.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[subj]
	}
	// Without batches each line is a request the hub stores and syncs
	// before the next: a machine under a load of 15 took a minute for
	// 340 of them, so the bound is for lines that never come, not slow.
	testenv.WaitFor(t, 5*time.Minute, func() (bool, string) {
		got := onHub("s2")
		return got == n, fmt.Sprintf("%d of the %d lines after the image on the hub", got, n)
	})
	if got := onHub("s1"); got != 0 {
		t.Fatalf("the image's session has %d messages on the hub while it held every batch: the test proves nothing", got)
	}
	if st := f.Stats(); st.Waiting != 1 {
		t.Errorf("the forwarder's stats say %d sessions wait for a batch, want 1", st.Waiting)
	}
	if strings.Contains(logs.String(), "paused") {
		t.Errorf("forwarding was reported paused for a session that waits:\n%s", logs.String())
	}
}

// holdEveryBatch opens as many atomic batches on PI_HUB as it allows, as
// another node would: a first message each, never committed.
func holdEveryBatch(t *testing.T, hubJS jetstream.JetStream) {
	t.Helper()
	for i := range 60 {
		m := nats.NewMsg(eventlog.UpSubject("eve", "s-eve"))
		m.Data = []byte("{}")
		m.Header.Set("Nats-Batch-Id", fmt.Sprintf("eve-%d", i))
		m.Header.Set("Nats-Batch-Sequence", "1")
		if err := hubJS.Conn().PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := hubJS.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
}
