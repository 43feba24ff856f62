package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

func openLog(t *testing.T) *eventlog.Local {
	t.Helper()
	return openLogWith(t, embedded.Config{StateDir: t.TempDir(), NodeID: "n1"})
}

// openLogWith is openLog on a server started with cfg.
func openLogWith(t *testing.T, cfg embedded.Config) *eventlog.Local {
	t.Helper()
	_, lg := startLog(t, cfg)
	return lg
}

// startLog starts a server with cfg and opens the local log on it, both
// closed when the test ends.
func startLog(t *testing.T, cfg embedded.Config) (*embedded.Server, *eventlog.Local) {
	t.Helper()
	srv, err := embedded.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	_, lg := localOn(t, srv, "n1")
	return srv, lg
}

func mkLines(n, size int, prefix string) []eventlog.Line {
	var out []eventlog.Line
	for i := 0; i < n; i++ {
		raw := []byte(fmt.Sprintf(`{"type":"message","id":"%s%d","pad":%q}`, prefix, i, strings.Repeat("p", size)))
		out = append(out, eventlog.NewLine(raw, fmt.Sprintf("%s%d", prefix, i), "", "message", "f.jsonl", int64(i+1)))
	}
	return out
}

func readAll(t *testing.T, lg *eventlog.Local, sid string) []*eventlog.Event {
	t.Helper()
	var evs []*eventlog.Event
	if err := lg.Scan(context.Background(), sid, 0, true, func(ev *eventlog.Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestPublishSinglesBatchesAndChunks(t *testing.T) {
	lg := openLog(t)
	ctx := context.Background()
	sid := "a.session*id"

	var all []eventlog.Line
	last := uint64(0)
	for _, group := range [][]eventlog.Line{
		mkLines(3, 100, "s"),                   // single publishes
		mkLines(2500, 200, "b"),                // three atomic batches
		mkLines(1, 3*eventlog.MaxChunk+5, "c"), // one chunked line, atomic
		append(mkLines(2, 10, "m"), mkLines(1, eventlog.MaxChunk+1, "n")...),
	} {
		seq, n, err := lg.Publish(ctx, sid, last, group)
		if err != nil || n != len(group) {
			t.Fatalf("publish %d lines: stored %d: %v", len(group), n, err)
		}
		last = seq
		all = append(all, group...)
	}
	evs := readAll(t, lg, sid)
	if len(evs) != len(all) {
		t.Fatalf("read %d events, want %d", len(evs), len(all))
	}
	for i, ev := range evs {
		if !bytes.Equal(ev.Raw, all[i].Raw) || ev.ID != all[i].ID || ev.SID != sid || ev.Node != "n1" {
			t.Fatalf("event %d differs: id %q want %q, %d bytes want %d", i, ev.ID, all[i].ID, len(ev.Raw), len(all[i].Raw))
		}
	}
	if evs[len(evs)-1].Seq != last {
		t.Errorf("last event seq %d, publisher said %d", evs[len(evs)-1].Seq, last)
	}
}

func TestPublishRefusesAStalePosition(t *testing.T) {
	lg := openLog(t)
	ctx := context.Background()
	seq, _, err := lg.Publish(ctx, "s", 0, mkLines(1, 10, "a"))
	if err != nil {
		t.Fatal(err)
	}
	// Expecting an empty subject again (a second writer, or a stale cache)
	// must fail, for a single publish and for a batch alike.
	if _, n, err := lg.Publish(ctx, "s", 0, mkLines(1, 10, "b")); !errors.Is(err, eventlog.ErrWrongLastSequence) || n != 0 {
		t.Fatalf("single: stored %d, err %v; want ErrWrongLastSequence", n, err)
	}
	if _, n, err := lg.Publish(ctx, "s", 0, mkLines(40, 10, "c")); !errors.Is(err, eventlog.ErrWrongLastSequence) || n != 0 {
		t.Fatalf("batch: stored %d, err %v; want ErrWrongLastSequence", n, err)
	}
	if _, _, err := lg.Publish(ctx, "s", seq, mkLines(40, 10, "d")); err != nil {
		t.Fatalf("publish at the right position: %v", err)
	}
	if got := len(readAll(t, lg, "s")); got != 41 {
		t.Fatalf("subject holds %d events, want 41", got)
	}
}

// TestPublishAgainAfterALostAck: the tailer's lines carry no message id
// (nothing for the server to keep for its duplicate window); the same
// lines sent again at the same position, as after an acknowledgement that
// never came, are refused by the expected sequence and stored once, for a
// single publish, a batch and a group of sessions alike.
func TestPublishAgainAfterALostAck(t *testing.T) {
	lg := openLog(t)
	ctx := context.Background()
	var want uint64
	for _, lines := range [][]eventlog.Line{mkLines(1, 10, "one"), mkLines(30, 10, "batch"), mkLines(1, 2*eventlog.MaxChunk, "chunked")} {
		sid := lines[0].ID
		want += uint64((&eventlog.Group{Lines: lines}).Messages())
		for try := range 2 {
			_, n, err := lg.Publish(ctx, sid, 0, lines)
			if try == 0 && (err != nil || n != len(lines)) {
				t.Fatalf("%s: stored %d of %d: %v", sid, n, len(lines), err)
			}
			if try == 1 && (!errors.Is(err, eventlog.ErrWrongLastSequence) || n != 0) {
				t.Fatalf("%s sent again: stored %d, err %v; want ErrWrongLastSequence", sid, n, err)
			}
		}
		if got := len(readAll(t, lg, sid)); got != len(lines) {
			t.Fatalf("%s: subject holds %d events, want %d", sid, got, len(lines))
		}
	}
	groups := []eventlog.Group{{SID: "g1", Lines: mkLines(3, 10, "g1-")}, {SID: "g2", Lines: mkLines(2, 10, "g2-")}}
	if _, err := lg.PublishGroups(ctx, groups); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.PublishGroups(ctx, groups); !errors.Is(err, eventlog.ErrWrongLastSequence) {
		t.Fatalf("group sent again: %v; want ErrWrongLastSequence", err)
	}
	info, err := lg.Stream().Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range groups {
		want += uint64(groups[i].Messages())
	}
	if info.State.Msgs != want {
		t.Fatalf("PI_LOCAL holds %d messages, want %d", info.State.Msgs, want)
	}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := lg.Stream().GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if id := m.Header.Get(nats.MsgIdHdr); id != "" {
			t.Fatalf("message %d (%s) carries the message id %q", seq, m.Subject, id)
		}
	}
}

// TestLocalHintsStored: what Local.Stored hands the forwarder is what
// PI_LOCAL holds, at the same sequence, even when the caller reuses the
// line's bytes after the publish (the tailer's read buffer); a batch is
// not handed over.
func TestLocalHintsStored(t *testing.T) {
	lg := openLog(t)
	ctx := context.Background()
	sid := "hinted"
	var last uint64
	for i := range 3 {
		l := mkLines(1, 50, fmt.Sprintf("h%d-", i))
		seq, _, err := lg.Publish(ctx, sid, last, l)
		if err != nil {
			t.Fatal(err)
		}
		last = seq
		for j := range l[0].Raw {
			l[0].Raw[j] = 'x' // the buffer read next
		}
		var hint []jetstream.Msg
		select {
		case hint = <-lg.Stored():
		default:
			t.Fatalf("publish %d: no hint", i)
		}
		meta, _ := hint[0].Metadata()
		m, err := lg.Stream().GetMsg(ctx, meta.Sequence.Stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(hint) != 1 || meta.Sequence.Stream != seq || m.Subject != hint[0].Subject() ||
			!bytes.Equal(m.Data, hint[0].Data()) || m.Header.Get(eventlog.HdrSha) != hint[0].Headers().Get(eventlog.HdrSha) {
			t.Fatalf("publish %d: hint at %d (%q) differs from PI_LOCAL's message at %d (%q)", i, meta.Sequence.Stream, hint[0].Data(), seq, m.Data)
		}
	}
	if _, _, err := lg.Publish(ctx, sid, last, mkLines(40, 10, "b")); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-lg.Stored():
		t.Fatalf("a batch was handed over (%d messages)", len(h))
	default:
	}
}

// TestInOrder: a reader takes the message right after what it handled,
// skips what it handled, and stops at a hint that skips ahead (its
// consumer brings that one, in order); a consumer's message past a gap is
// taken (the consumer delivers only what the stream holds, in order).
func TestInOrder(t *testing.T) {
	for _, c := range []struct {
		seq, last  uint64
		hinted     bool
		take, stop bool
	}{
		{5, 4, true, true, false},
		{5, 4, false, true, false},
		{4, 4, true, false, false},
		{3, 4, false, false, false},
		{6, 4, true, false, true},
		{6, 4, false, true, false},
	} {
		if take, stop := eventlog.InOrder(c.seq, c.last, c.hinted); take != c.take || stop != c.stop {
			t.Errorf("InOrder(%d, %d, %v) = %v, %v; want %v, %v", c.seq, c.last, c.hinted, take, stop, c.take, c.stop)
		}
	}
}
