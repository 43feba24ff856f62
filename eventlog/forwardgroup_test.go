package eventlog_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// interleave publishes rounds lines in each of sessions sessions of node's
// PI_LOCAL, a line of each session in turn, as a machine writing many
// sessions at once leaves it, and returns each session's PI_LOCAL
// sequences so far (last holds where each subject was, and is updated).
func interleave(t *testing.T, local *eventlog.Local, sessions, rounds int, last []uint64, seqs map[string][]uint64) {
	t.Helper()
	ctx := context.Background()
	for r := range rounds {
		for s := range sessions {
			sid := fmt.Sprint("s", s)
			id := fmt.Sprintf("%s-%d-%d", sid, len(seqs[sid]), r)
			l := eventlog.NewLine(fmt.Appendf(nil, `{"type":"message","id":%q}`, id), id, "", "message", "f.jsonl", int64(r))
			seq, _, err := local.Publish(ctx, sid, last[s], []eventlog.Line{l})
			if err != nil {
				t.Fatal(err)
			}
			last[s] = seq
			seqs[sid] = append(seqs[sid], seq)
		}
	}
}

// hubRequests counts what the hub is sent on node's subjects: the
// requests (an atomic batch, or a line sent alone) and the messages.
type hubRequests struct {
	sub *nats.Subscription
}

func watchHub(t *testing.T, hubJS jetstream.JetStream, node string) *hubRequests {
	t.Helper()
	sub, err := hubJS.Conn().SubscribeSync(eventlog.UpPrefix + "." + node + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := hubJS.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return &hubRequests{sub: sub}
}

// take reads n messages the hub was sent and returns how many requests
// carried them.
func (h *hubRequests) take(t *testing.T, n int) (requests int) {
	t.Helper()
	batches := map[string]bool{}
	for range n {
		m, err := h.sub.NextMsg(time.Minute)
		if err != nil {
			t.Fatalf("a message the hub was sent: %v", err)
		}
		id := m.Header.Get("Nats-Batch-Id")
		if id == "" || !batches[id] {
			requests++
		}
		if id != "" {
			batches[id] = true
		}
	}
	return requests
}

// checkHub checks that PI_HUB holds, on each of node's session subjects,
// the lines of seqs (their PI_LOCAL sequences, as Pi-Src-Seq) in order,
// each once, and nothing else.
func checkHub(t *testing.T, hubJS jetstream.JetStream, node string, seqs map[string][]uint64) {
	t.Helper()
	ctx := context.Background()
	total := 0
	for _, s := range seqs {
		total += len(s)
	}
	hub, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*time.Minute, func() (bool, string) {
		info, err := hub.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.State.Msgs >= uint64(total), fmt.Sprintf("%d of %d lines on the hub", info.State.Msgs, total)
	})
	cons, err := hub.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]uint64{}
	batch, err := cons.Fetch(total+1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		src, err := strconv.ParseUint(m.Headers().Get(eventlog.HdrSrcSeq), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", m.Subject(), err)
		}
		sid := m.Subject()[strings.LastIndexByte(m.Subject(), '.')+1:]
		got[sid] = append(got[sid], src)
	}
	if len(got) != len(seqs) {
		t.Fatalf("the hub holds %d sessions, want %d", len(got), len(seqs))
	}
	for sid, want := range seqs {
		if fmt.Sprint(got[sid]) != fmt.Sprint(want) {
			t.Fatalf("the hub holds %s's lines %v, want %v", sid, got[sid], want)
		}
	}
}

// TestForwarderGroupsSessions: a backlog written across many sessions at
// once (a line of each in turn) goes to the hub in atomic batches of many
// sessions: 100 sessions of 3 lines took a few requests, where a session
// at a time took 300 (each session's 3 lines a request each: too few for a
// batch of their own). Each session's lines are on the hub once, in order,
// and lines written afterwards follow them without a refused position: the
// subject sequences the forwarder took from a batch's ack are the hub's.
func TestForwarderGroupsSessions(t *testing.T) {
	hubJS, ws, _ := hubAndLeaf(t)
	nc, local := localOn(t, ws, "w1")
	const sessions = 100
	last, seqs := make([]uint64, sessions), map[string][]uint64{}
	interleave(t, local, sessions, 3, last, seqs)
	watch := watchHub(t, hubJS, "w1")
	_, logs := runWatchingForwarder(t, ws, nc, local)
	if got := watch.take(t, 3*sessions); got > sessions/4 {
		t.Errorf("the hub was sent %d requests for %d sessions of 3 lines, want at most %d: the sessions were not sent together", got, sessions, sessions/4)
	}
	checkHub(t, hubJS, "w1", seqs)
	interleave(t, local, sessions, 2, last, seqs)
	checkHub(t, hubJS, "w1", seqs)
	if l := logs.String(); strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
		t.Fatalf("the forwarder warned:\n%s", l)
	}
}

// TestForwarderGroupRefused: while the hub takes no batch (another node
// holds every one PI_HUB may have open), many sessions' lines go to the
// hub one by one, each once, in order.
func TestForwarderGroupRefused(t *testing.T) {
	hubJS, ws, _ := hubAndLeaf(t)
	holdEveryBatch(t, hubJS)
	nc, local := localOn(t, ws, "w1")
	const sessions = 20
	last, seqs := make([]uint64, sessions), map[string][]uint64{}
	interleave(t, local, sessions, 3, last, seqs)
	watch := watchHub(t, hubJS, "w1")
	_, logs := runWatchingForwarder(t, ws, nc, local)
	watch.take(t, 3*sessions)
	checkHub(t, hubJS, "w1", seqs)
	if !strings.Contains(logs.String(), "the hub takes no batch") {
		t.Fatalf("the forwarder did not say the hub refused its batch: the test proves nothing\n%s", logs)
	}
}
