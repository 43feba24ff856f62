package admit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// history is what PI_ALL held before this run: who published lines of
// which session.
type history map[[2]string]bool

func (h history) HasLines(_ context.Context, node, sid string) (bool, error) {
	return h[[2]string{node, sid}], nil
}

func from(node, sid, raw string) *eventlog.Event {
	ev := line(raw)
	ev.Node, ev.SID = node, sid
	return ev
}

func op(node, sid, o string) *eventlog.Event {
	return &eventlog.Event{Node: node, SID: sid, Op: o, Type: "tombstone", File: "--p--/x.jsonl",
		Raw: []byte(`{"op":"` + o + `","file":"--p--/x.jsonl"}`)}
}

func hdrOf(sid string) string {
	return `{"type":"session","version":3,"id":"` + sid + `","timestamp":"2026-11-30T00:00:00.000Z","cwd":"/p"}`
}

type authorityCase struct {
	ev   *eventlog.Event
	want bool
}

// checkAuthority admits each case's control event through g and checks it
// is admitted, or refused for want of authority, as the case says.
func checkAuthority(t *testing.T, g *Gate, cases []authorityCase) {
	t.Helper()
	for _, c := range cases {
		err := g.Admit(context.Background(), c.ev, time.Now())
		if (err == nil) != c.want {
			t.Errorf("%s of %s by %s: %v, want admitted=%v", c.ev.Op, c.ev.SID, c.ev.Node, err, c.want)
		}
		var r *Rejection
		if err != nil && (!errors.As(err, &r) || r.Reason != NoAuthority) {
			t.Errorf("%s by %s: %v, want %s", c.ev.Op, c.ev.Node, err, NoAuthority)
		}
	}
}

// TestAuthority: delete, restore and erase are admitted only from a node
// that published lines of the session, in this run or before it.
func TestAuthority(t *testing.T) {
	ctx := context.Background()
	g := New("me", Limits{}, history{{"bob", "old"}: true}, nil)
	if err := g.Admit(ctx, from("ann", "s1", hdrOf("s1")), time.Now()); err != nil {
		t.Fatal(err)
	}
	checkAuthority(t, g, []authorityCase{
		{op("ann", "s1", eventlog.OpDelete), true},   // ann wrote s1 in this run
		{op("bob", "old", eventlog.OpErase), true},   // bob wrote it before
		{op("me", "s1", eventlog.OpRestore), true},   // our own
		{op("eve", "s1", eventlog.OpDelete), false},  // never wrote s1
		{op("eve", "s1", eventlog.OpRestore), false}, // likewise
		{op("ann", "old", eventlog.OpErase), false},
	})
	if s := g.Stats(); s.ByOrigin["eve"].ByReason[NoAuthority] != 2 || s.ByOrigin["ann"].ByReason[NoAuthority] != 1 {
		t.Errorf("stats: %+v", s.ByOrigin)
	}
	// Admitted: ann's header, ann's delete, bob's erase and our own
	// restore; the restore is also counted as our own (status shows
	// other machines' events apart from those back from the hub).
	if err := g.Admit(ctx, from("me", "s2", hdrOf("s2")), time.Now()); err != nil {
		t.Fatal(err)
	}
	if s := g.Stats(); s.Admitted != 5 || s.Own != 2 {
		t.Errorf("admitted %d, own %d; want 5 and 2", s.Admitted, s.Own)
	}
}

// TestSessionQuota: past its hourly quota an origin's new sessions are
// rejected with their lines (quarantined), other origins are not touched,
// and the quota refills with hub time.
func TestSessionQuota(t *testing.T) {
	ctx := context.Background()
	g := New("me", Limits{SessionsPerHour: 10}, history{}, nil)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	admitted := 0
	for i := range 115 {
		sid := fmt.Sprint("e", i)
		if g.Admit(ctx, from("eve", sid, hdrOf(sid)), t0.Add(time.Duration(i)*time.Second)) == nil {
			admitted++
		}
		// A later line of the same session follows its header's fate.
		err := g.Admit(ctx, from("eve", sid, `{"type":"message","id":"m1","message":{}}`), t0)
		if (err == nil) != (i < 100) {
			t.Errorf("line of session %d: %v", i, err)
		}
	}
	// Ten hours' worth at once (a backlog), then the hourly rate.
	if admitted != 100 {
		t.Errorf("admitted %d new sessions, want 100", admitted)
	}
	if err := g.Admit(ctx, from("ann", "a1", hdrOf("a1")), t0); err != nil {
		t.Errorf("another origin: %v", err)
	}
	// Half an hour of hub time later, five more.
	later := t0.Add(30 * time.Minute)
	n := 0
	for i := range 10 {
		sid := fmt.Sprint("f", i)
		if g.Admit(ctx, from("eve", sid, hdrOf(sid)), later) == nil {
			n++
		}
	}
	if n != 5 {
		t.Errorf("after 30 min: %d admitted, want 5", n)
	}
	s := g.Stats()
	if len(s.Quarantined) == 0 || s.ByOrigin["eve"].ByReason[SessionQuota] != 20 {
		t.Errorf("stats: %+v", s)
	}
}

// TestByteQuota bounds the bytes an origin sends per hour.
func TestByteQuota(t *testing.T) {
	ctx := context.Background()
	g := New("me", Limits{BytesPerHour: 1000}, history{}, nil)
	at := time.Now()
	sent := 0
	for i := range 150 {
		ev := from("eve", "s", fmt.Sprintf(`{"type":"message","id":"m%d","pad":"%060d"}`, i, 0))
		if g.Admit(ctx, ev, at) == nil {
			sent += len(ev.Raw)
		}
	}
	if sent > 10*1000 || sent < 9*1000 {
		t.Errorf("admitted %d bytes in one moment, want just under ten hours' worth, 10000", sent)
	}
}

// TestQuotaTakesABacklog: a machine that joins the team with the sessions
// it holds forwards them within seconds of hub time. At the default quota
// (2,000 an hour) every one of a backlog of 10,000 sessions is admitted,
// not the first 2,000 (the rest were rejected, on every machine, for good).
func TestQuotaTakesABacklog(t *testing.T) {
	ctx := context.Background()
	g := New("me", Limits{SessionsPerHour: 2000, BytesPerHour: 2 << 30}, history{}, nil)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range 10_000 {
		sid := fmt.Sprint("b", i)
		at := t0.Add(time.Duration(i) * time.Millisecond)
		if err := g.Admit(ctx, from("bob", sid, hdrOf(sid)), at); err != nil {
			t.Fatalf("session %d of the backlog: %v", i, err)
		}
	}
}

// TestQuarantine: an origin's session that keeps failing is quarantined;
// its valid lines are passed over too, other sessions of the origin not.
func TestQuarantine(t *testing.T) {
	ctx := context.Background()
	g := New("me", Limits{}, history{}, nil)
	for range quarantineAfter {
		g.Admit(ctx, from("eve", "bad", `[1]`), time.Now())
	}
	if err := g.Admit(ctx, from("eve", "bad", hdrOf("bad")), time.Now()); !errors.Is(err, eventlog.ErrRejected) {
		t.Errorf("valid line of a quarantined session: %v", err)
	}
	if err := g.Admit(ctx, from("eve", "good", hdrOf("good")), time.Now()); err != nil {
		t.Errorf("another session: %v", err)
	}
	if err := g.Admit(ctx, from("ann", "bad", hdrOf("bad")), time.Now()); err != nil {
		t.Errorf("another origin's lines of the same session: %v", err)
	}
	q := g.Stats().Quarantined
	if len(q) != 1 || q[0].Node != "eve" || q[0].Session != "bad" {
		t.Errorf("quarantined: %+v", q)
	}
}

// TestAuthorityNarrowedTrust: with PISYNC_TRUSTED_NODES narrowed, a line
// of an untrusted node gives it no say over a session this node or a
// trusted node wrote: its delete, restore or erase is refused (before, one
// line of its own, admitted though not written, let a teammate erase the
// user's own session on every machine). Over a session of its own, and
// with every node trusted, it keeps the say its lines give it.
func TestAuthorityNarrowedTrust(t *testing.T) {
	ctx := context.Background()
	h := history{{"ann", "anns"}: true, {"eve", "anns"}: true, {"me", "mine"}: true, {"eve", "mine"}: true, {"eve", "eves"}: true}
	g := New("me", Limits{}, h, nil)
	g.Trust([]string{"ann"})
	checkAuthority(t, g, []authorityCase{
		{op("eve", "anns", eventlog.OpErase), false},  // ann's, though eve wrote a line
		{op("eve", "mine", eventlog.OpDelete), false}, // this node's
		{op("eve", "mine", eventlog.OpRestore), false},
		{op("eve", "eves", eventlog.OpErase), true},  // eve's own
		{op("ann", "anns", eventlog.OpDelete), true}, // trusted
		{op("me", "anns", eventlog.OpErase), true},   // this node
	})
	// Every node trusted (*): lines give the say, as before.
	g = New("me", Limits{}, h, nil)
	if err := g.Admit(ctx, op("eve", "anns", eventlog.OpErase), time.Now()); err != nil {
		t.Errorf("with every node trusted: %v", err)
	}
}

// TestHubCausedRejectionsQuarantineNothing: a hub client that publishes
// again, nine times, a sealed line of an erased session (its key message
// older than the erase's) has it refused as erased each time; it is the
// hub's doing, and the origin's later lines of the session (restored,
// written under a new key) are still admitted.
func TestHubCausedRejectionsQuarantineNothing(t *testing.T) {
	ctx := context.Background()
	for _, reason := range []string{eventlog.RejectReplayed, eventlog.RejectUnsealed, eventlog.RejectErased} {
		g := New("me", Limits{}, history{}, nil)
		for range quarantineAfter + 1 {
			g.Reject("n2", "s1", reason, "a copy from the hub")
		}
		if err := g.Admit(ctx, from("n2", "s1", hdrOf("s1")), time.Now()); err != nil {
			t.Errorf("%s: n2's next line of s1: %v", reason, err)
		}
	}
}

// TestRejectionsLoggedOncePerReason: each reason a session of an origin is
// rejected for is said in the log once (the first rejection of the session
// alone was: a moved line after a tampered one went unsaid), and a reason
// said before is not said again.
func TestRejectionsLoggedOncePerReason(t *testing.T) {
	var log strings.Builder
	g := New("me", Limits{}, history{}, slog.New(slog.NewTextHandler(&log, nil)))
	for _, reason := range []string{eventlog.RejectUndecryptable, eventlog.RejectUndecryptable, eventlog.RejectMoved, eventlog.RejectMoved} {
		g.Reject("eve", "htoken", reason, "detail")
	}
	for reason, want := range map[string]int{eventlog.RejectUndecryptable: 1, eventlog.RejectMoved: 1} {
		if n := strings.Count(log.String(), "reason="+reason); n != want {
			t.Errorf("%s said %d times, want %d:\n%s", reason, n, want, log.String())
		}
	}
}
