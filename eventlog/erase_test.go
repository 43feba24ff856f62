package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

const secret = "sk-live-ERASE-ME-0123456789"

// storeWith starts an embedded server in dir and returns a connection.
func storeWith(t *testing.T, dir string) (*embedded.Server, *nats.Conn) {
	t.Helper()
	srv, err := embedded.Start(context.Background(), embedded.Config{StateDir: dir, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := srv.Connect()
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	return srv, nc
}

// secretLines are lines of a session that carry the secret, one of them
// long enough to be split into chunks.
func secretLines(prefix string) []eventlog.Line {
	lines := mkLines(3, 50, prefix)
	for _, raw := range []string{
		`{"type":"message","id":"` + prefix + `s","text":"my key is ` + secret + `"}`,
		`{"type":"message","id":"` + prefix + `big","text":"` + strings.Repeat("x", eventlog.MaxChunk) + secret + `"}`,
	} {
		lines = append(lines, eventlog.NewLine([]byte(raw), "", "", "message", "f.jsonl", 1))
	}
	return lines
}

// grepStore lists the files under dir that hold s.
func grepStore(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			hits = append(hits, p)
		}
		return nil
	})
	return hits
}

// countOn counts the messages of stream on filter.
func countOn(t *testing.T, js jetstream.JetStream, stream, filter string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// TestEraseSession: a session's lines go from PI_LOCAL (this node's) and
// PI_ALL (every node's), split lines included, other sessions stay, the
// erase event stays, an erase bounded by a sequence keeps what follows it,
// and the secret is in no file of the store afterwards: the deletes
// overwrite the messages on disk.
func TestEraseSession(t *testing.T) {
	dir := t.TempDir()
	srv, nc := storeWith(t, dir)
	defer srv.Close()
	defer nc.Close()
	ctx := context.Background()
	lg, err := eventlog.OpenLocal(ctx, nc, "n1")
	if err != nil {
		t.Fatal(err)
	}
	all, err := eventlog.OpenAll(ctx, lg.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	js := lg.JetStream()
	last, _, err := lg.Publish(ctx, "s1", 0, secretLines("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := lg.Publish(ctx, "s2", 0, mkLines(4, 10, "k")); err != nil {
		t.Fatal(err)
	}
	// PI_ALL, as the downloader fills it: s1 from two nodes, s2 from one.
	pub := eventlog.NewPublisher(nc, js, 0)
	for _, c := range []struct {
		node, sid string
		lines     []eventlog.Line
	}{{"n1", "s1", secretLines("a")}, {"n2", "s1", secretLines("b")}, {"n2", "s2", mkLines(2, 10, "m")}} {
		if _, _, err := pub.Publish(ctx, eventlog.AllSubject(c.node, c.sid), 0, c.lines); err != nil {
			t.Fatal(err)
		}
	}
	if hits := grepStore(t, dir, secret); len(hits) == 0 {
		t.Fatal("the secret is not in the store to begin with: the test shows nothing")
	}

	var counts []int // what a long erase says as it goes
	n, err := eventlog.EraseSessionEach(ctx, js, "n1", "s1", eventlog.EraseBounds{}, func(n int) { counts = append(counts, n) })
	if err != nil {
		t.Fatal(err)
	}
	// 5 lines each, the long one in 2 chunks: 6 messages per copy.
	if n.Local != 6 || n.All != 12 {
		t.Fatalf("erased %+v messages, want 6 in PI_LOCAL and 12 in PI_ALL", n)
	}
	if len(counts) != 18 || counts[0] != 1 || counts[6] != 7 || counts[17] != 18 {
		t.Errorf("progress %v, want 1 to 18, both streams together", counts)
	}
	if c := countOn(t, js, eventlog.LocalStream, eventlog.LocalSubject("n1", "s1")); c != 0 {
		t.Errorf("PI_LOCAL holds %d messages of s1", c)
	}
	if c := countOn(t, js, eventlog.AllStream, eventlog.SessionFilter("s1")); c != 0 {
		t.Errorf("PI_ALL holds %d messages of s1", c)
	}
	if c := countOn(t, js, eventlog.LocalStream, ">"); c != 4 {
		t.Errorf("PI_LOCAL holds %d messages of other sessions, want 4", c)
	}
	if c := countOn(t, js, eventlog.AllStream, ">"); c != 2 {
		t.Errorf("PI_ALL holds %d messages of other sessions, want 2", c)
	}
	if _, err := all.Stream().GetMsg(ctx, 1, jetstream.WithGetMsgSubject(eventlog.SessionFilter("s1"))); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("direct get of s1 in PI_ALL: %v, want not found", err)
	}
	if hits := grepStore(t, dir, secret); len(hits) > 0 {
		t.Errorf("the secret is still in %v", hits)
	}

	// The erase event follows; a second erase (a replay) keeps it.
	evSeq, err := lg.PublishErase(ctx, "s1", eventlog.EraseLine("p/f.jsonl", time.Now()))
	if err != nil || evSeq <= last {
		t.Fatalf("erase event at %d (after %d): %v", evSeq, last, err)
	}
	if n, err := eventlog.EraseSession(ctx, js, "n1", "s1", eventlog.EraseBounds{}); err != nil || n != (eventlog.Erased{}) {
		t.Fatalf("second erase: %+v, %v", n, err)
	}
	_, ev, err := lg.Last(ctx, "s1")
	if err != nil || ev == nil || ev.Op != eventlog.OpErase || ev.File != "p/f.jsonl" {
		t.Fatalf("last event of s1: %+v, %v", ev, err)
	}
	// A new session with the same id after the event is bounded out.
	after, _, err := lg.Publish(ctx, "s1", evSeq, mkLines(2, 10, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := eventlog.EraseSession(ctx, js, "n1", "s1", eventlog.EraseBounds{Local: evSeq}); err != nil || n.Local != 0 {
		t.Fatalf("bounded erase: %+v, %v", n, err)
	}
	if seq, _, err := lg.Last(ctx, "s1"); err != nil || seq != after {
		t.Fatalf("s1 ends at %d (%v), want the new lines' %d", seq, err, after)
	}

	nc.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if hits := grepStore(t, dir, secret); len(hits) > 0 {
		t.Errorf("after the server stopped, the secret is in %v", hits)
	}
}

// TestEraseHub: the hub's copy goes up to the last erase event, which
// stays with whatever follows it; without an erase event the hub refuses
// unless forced.
func TestEraseHub(t *testing.T) {
	dir, js, pub := hubStore(t)
	ctx := context.Background()
	a, _, err := pub.Publish(ctx, eventlog.UpSubject("n1", "s1"), 0, secretLines("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), 0, secretLines("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.EraseHub(ctx, js, "s1", false); !errors.Is(err, eventlog.ErrNoEraseEvent) {
		t.Fatalf("hub erase without an erase event: %v", err)
	}
	// An erase event from a node that only held a copy (n4 published no
	// line of s1), which every workstation refuses, is not taken either:
	// before, it erased n1's and n2's lines from the hub.
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n4", "s1"), 0, []eventlog.Line{eventlog.EraseLine("p/f.jsonl", time.Now())}); err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.EraseHub(ctx, js, "s1", false); !errors.Is(err, eventlog.ErrNoEraseEvent) || !strings.Contains(err.Error(), "n4, which only held a copy") {
		t.Fatalf("hub erase with a copy's erase event alone: %v", err)
	}
	if c := countOn(t, js, eventlog.HubStream, eventlog.UpPrefix+".*.s1"); c != 13 {
		t.Fatalf("PI_HUB holds %d messages of s1, want all 13", c)
	}
	if res, err := eventlog.EraseHub(ctx, js, "unknown", false); err != nil || res.Found {
		t.Fatalf("hub erase of a session the hub does not hold: %+v, %v", res, err)
	}
	ev, _, err := pub.Publish(ctx, eventlog.UpSubject("n1", "s1"), a, []eventlog.Line{eventlog.EraseLine("p/f.jsonl", time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	// n2 wrote on after the event: a new session, kept.
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n3", "s1"), 0, mkLines(1, 10, "late")); err != nil {
		t.Fatal(err)
	}
	res, err := eventlog.EraseHub(ctx, js, "s1", false)
	if err != nil || res.Messages != 12 || res.Before != ev {
		t.Fatalf("hub erase: %+v, %v; want 12 messages before %d", res, err, ev)
	}
	if c := countOn(t, js, eventlog.HubStream, eventlog.UpPrefix+".*.s1"); c != 3 {
		t.Errorf("PI_HUB holds %d messages of s1, want the two erase events and the later line", c)
	}
	// Run again: the erase events left have no line before them.
	if res, err := eventlog.EraseHub(ctx, js, "s1", false); err != nil || res.Messages != 0 || res.Before != ev {
		t.Fatalf("hub erase again: %+v, %v", res, err)
	}
	if hits := grepStore(t, dir, secret); len(hits) > 0 {
		t.Errorf("the secret is still in %v", hits)
	}
}

// TestEraseHubNode: every line of one node goes, on every session, and
// nothing of the other nodes'; its erase events stay; a node the hub does
// not hold is no error, and a name that is no node is refused.
func TestEraseHubNode(t *testing.T) {
	_, js, pub := hubStore(t)
	ctx := context.Background()
	last := map[string]uint64{}
	for _, node := range []string{"eve", "ann"} {
		for _, sid := range []string{"s1", "s2"} {
			seq, _, err := pub.Publish(ctx, eventlog.UpSubject(node, sid), 0, secretLines(node))
			if err != nil {
				t.Fatal(err)
			}
			last[node+sid] = seq
		}
	}
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("eve", "s1"), last["eves1"], []eventlog.Line{eventlog.EraseLine("p/f.jsonl", time.Now())}); err != nil {
		t.Fatal(err)
	}
	annBefore := countOn(t, js, eventlog.HubStream, eventlog.UpPrefix+".ann.>")
	eveLines := int(countOn(t, js, eventlog.HubStream, eventlog.UpPrefix+".eve.>")) - 1 // but the erase event
	var counted []int
	res, err := eventlog.EraseHubNode(ctx, js, "eve", func(n int) { counted = append(counted, n) })
	if err != nil || !res.Found || res.Messages != eveLines {
		t.Fatalf("erase eve: %+v, %v; want %d messages", res, err, eveLines)
	}
	if len(counted) != eveLines || counted[len(counted)-1] != eveLines {
		t.Errorf("progress said %v for %d messages erased", counted, eveLines)
	}
	if c := countOn(t, js, eventlog.HubStream, eventlog.UpPrefix+".eve.>"); c != 1 {
		t.Errorf("PI_HUB holds %d messages of eve, want her erase event alone", c)
	}
	if c := countOn(t, js, eventlog.HubStream, eventlog.UpPrefix+".ann.>"); c != annBefore || c == 0 {
		t.Errorf("PI_HUB holds %d messages of ann, had %d", c, annBefore)
	}
	if res, err := eventlog.EraseHubNode(ctx, js, "bob", nil); err != nil || res.Found {
		t.Errorf("erase a node with nothing on the hub: %+v, %v", res, err)
	}
	if _, err := eventlog.EraseHubNode(ctx, js, "ann.>", nil); err == nil {
		t.Error("a name with a wildcard was taken for a node")
	}
}

// hubStore is a store in a fresh dir holding PI_HUB as a hub's, and a
// publisher into it; closed when the test ends.
func hubStore(t *testing.T) (dir string, js jetstream.JetStream, pub *eventlog.Publisher) {
	t.Helper()
	dir = t.TempDir()
	srv, nc := storeWith(t, dir)
	t.Cleanup(func() {
		nc.Close()
		srv.Close()
	})
	js, _ = jetstream.New(nc)
	if _, err := eventlog.EnsureStream(context.Background(), js, eventlog.HubStreamConfig(1)); err != nil {
		t.Fatal(err)
	}
	return dir, js, eventlog.NewPublisher(nc, js, 0)
}

// TestHubUsage: what each node holds on PI_HUB, messages, payload bytes
// and sessions, read from the headers alone; an empty PI_HUB holds nothing.
func TestHubUsage(t *testing.T) {
	_, js, pub := hubStore(t)
	ctx := context.Background()
	if u, err := eventlog.HubUsage(ctx, js); err != nil || len(u) != 0 {
		t.Fatalf("usage of an empty PI_HUB: %v, %v", u, err)
	}
	big := []eventlog.Line{eventlog.NewLine(bytes.Repeat([]byte("j"), 100<<10), "j", "", "message", "f.jsonl", 0)}
	for i := range 3 {
		if _, _, err := pub.Publish(ctx, eventlog.UpSubject("eve", fmt.Sprintf("s%d", i)), 0, big); err != nil {
			t.Fatal(err)
		}
	}
	small := mkLines(1, 10, "ann")
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("ann", "s0"), 0, small); err != nil {
		t.Fatal(err)
	}
	u, err := eventlog.HubUsage(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if e := u["eve"]; e.Messages != 3 || e.Sessions != 3 || e.Bytes != 3*100<<10 {
		t.Errorf("eve: %+v, want 3 messages of 100 KiB in 3 sessions", e)
	}
	annBytes := int64(0)
	for _, l := range small {
		annBytes += int64(len(l.Raw))
	}
	if a := u["ann"]; a.Messages != int64(len(small)) || a.Sessions != 1 || a.Bytes != annBytes {
		t.Errorf("ann: %+v, want %d messages, %d bytes, 1 session", a, len(small), annBytes)
	}
	if len(u) != 2 {
		t.Errorf("usage names %d nodes: %v", len(u), u)
	}
	// Its consumer goes as it returns: the team's share of consumers is
	// its nodes + 8, and each `hub usage` left one for five minutes.
	st, err := js.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Consumers != 0 {
		t.Errorf("after two usage reads PI_HUB has %d consumers (%v), want 0", info.State.Consumers, err)
	}
}

// TestHubMark: a mark is held while PI_HUB holds its line at its sequence,
// stored when it was; a line of another node or position there, a stream
// that ends before it, or the same line stored again later (sent again
// after a restore to the very sequence it had: a probe, 2026-12-07) is a
// rewound store; a mark whose message was erased since cannot tell.
func TestHubMark(t *testing.T) {
	_, js, pub := hubStore(t)
	ctx := context.Background()
	lines := mkLines(3, 10, "ann")
	for i := range lines {
		lines[i].SrcSeq = uint64(10 + i)
	}
	last, _, err := pub.Publish(ctx, eventlog.UpSubject("ann", "s1"), 0, lines)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	stored := m.Time.UnixNano()
	for _, c := range []struct {
		name      string
		seq       uint64
		node      string
		src       uint64
		time      int64
		rewound   bool
		wantWords string
	}{
		{"held", last, "ann", 12, stored, false, ""},
		{"held, time not known", last, "ann", 12, 0, false, ""},
		{"held, sequence alone", last, "", 0, 0, false, ""},
		{"another position", last, "ann", 11, stored, true, "ann's line at 12, where this machine had ann's at 11"},
		{"another node", last, "bob", 12, stored, true, "where this machine had bob's"},
		{"stored again", last, "ann", 12, stored - 1, true, "was stored again at"},
		{"past the end", last + 5, "ann", 12, stored, true, "its last message is"},
	} {
		why, err := eventlog.Rewound(ctx, js, c.seq, c.node, c.src, c.time)
		if err != nil || (why != "") != c.rewound || !strings.Contains(why, c.wantWords) {
			t.Errorf("%s: %q, %v", c.name, why, err)
		}
	}
	if err := s.DeleteMsg(ctx, last); err != nil {
		t.Fatal(err)
	}
	if why, err := eventlog.Rewound(ctx, js, last, "ann", 12, stored+1); err != nil || why != "" {
		t.Errorf("a mark erased since: %q, %v; want held", why, err)
	}
}
