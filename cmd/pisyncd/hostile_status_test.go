package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHostileStatusLikeMessage replays an attack a probe found: eve
// stores, on her own hub subjects, messages of no payload with a Status
// header. nats.go takes such a message, delivered by a pull consumer or a
// direct get, for a status of the server's: the downloaders of ann and bob
// dropped it or ended at it and started over at it for good (every
// machine of the team stopped copying), and `hub erase` stopped at it, or
// took it for the end of the session and left the lines after it. Proves
// that, after each status nats.go acts on differently, sessions cross both
// ways within the bound, each message counted as eve's; and that the
// hub's erase of a session and of eve's lines takes them too.
func TestHostileStatusLikeMessage(t *testing.T) {
	e := startHostile(t, nil)
	statuses := []nats.Header{
		{"Status": {"100"}},
		{"Status": {"404"}},
		{"Status": {"408"}},
		{"Status": {"409"}, "Description": {"Consumer Deleted"}},
	}
	for i, h := range statuses {
		e.eve.Raw(t, fmt.Sprintf("0199e000-0000-7000-8000-%012d", i), h, nil)
		e.rounds(t, fmt.Sprintf("%04d", i), 1, stallBound)
	}
	for _, s := range []*station{e.ann, e.bob} {
		testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
			n := s.d.gate.Stats().ByOrigin["eve"].ByReason[admit.Reason(eventlog.RejectStatusLike)]
			return n == int64(len(statuses)), fmt.Sprintf("%s passed over %d of eve's %d messages as status-like", s.name, n, len(statuses))
		})
	}

	// One in the middle of a session of ann's, on eve's subject of it.
	sid := "0199c000-0000-7000-8000-000000000404"
	writeSession(t, e.ann, sid, 2)
	waitSecFile(t, e.bob, sid, 3, stallBound)
	e.eve.Raw(t, sid, nats.Header{"Status": {"404"}}, nil)
	appendLine(t, secPath(e.ann, sid), msgLine("ann-after", sid[:4]+"-1", "after eve's status"))
	waitSecFile(t, e.bob, sid, 4, stallBound)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := e.hub.operator(t, "t1")
	if _, err := eventlog.EraseHub(ctx, js, sid, true); err != nil {
		t.Fatalf("hub erase of ann's session: %v", err)
	}
	if n := teamHubCount(ctx, t, js, eventlog.UpPrefix+".*."+sid); n != 0 {
		t.Errorf("the hub holds %d messages of the erased session", n)
	}
	if _, err := eventlog.EraseHubNode(ctx, js, "eve", nil); err != nil {
		t.Fatalf("hub erase of eve's lines: %v", err)
	}
	if n := teamHubCount(ctx, t, js, eventlog.UpPrefix+".eve.>"); n != 0 {
		t.Errorf("the hub holds %d messages of eve's after erasing her lines", n)
	}
}

// teamHubCount counts PI_HUB's messages on subjects matching filter.
func teamHubCount(ctx context.Context, t *testing.T, js jetstream.JetStream, filter string) uint64 {
	t.Helper()
	n, err := subjectsCount(ctx, js, eventlog.HubStream, filter)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
