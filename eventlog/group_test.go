package eventlog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestPublishGroups: several sessions in one atomic batch land in order on
// their own subjects, each group's returned sequence is its subject's last;
// a group whose expected sequence is stale fails the whole batch (nothing
// stored), and a group of a long line (chunks) is carried whole.
func TestPublishGroups(t *testing.T) {
	lg := openLog(t)
	ctx := context.Background()
	a, b, c := mkLines(3, 10, "a"), mkLines(5, 10, "b"), mkLines(1, 3*eventlog.MaxChunk, "c")
	seqs, err := lg.PublishGroups(ctx, []eventlog.Group{{SID: "sa", Lines: a}, {SID: "sb", Lines: b}, {SID: "sc", Lines: c}})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range []struct {
		sid   string
		lines []eventlog.Line
	}{{"sa", a}, {"sb", b}, {"sc", c}} {
		evs := readAll(t, lg, g.sid)
		if len(evs) != len(g.lines) {
			t.Fatalf("%s holds %d events, want %d", g.sid, len(evs), len(g.lines))
		}
		for j, ev := range evs {
			if ev.Sha != g.lines[j].Sha {
				t.Fatalf("%s event %d is not line %d", g.sid, j, j)
			}
		}
		last, _, err := lg.Last(ctx, g.sid)
		if err != nil || last != seqs[i] {
			t.Fatalf("%s: last sequence %d (%v), PublishGroups said %d", g.sid, last, err, seqs[i])
		}
	}

	// sa moves on; a batch that still expects sa's old position fails
	// whole: sb's lines in it are not stored either.
	more := mkLines(2, 10, "a2-")
	if _, _, err := lg.Publish(ctx, "sa", seqs[0], more[:1]); err != nil {
		t.Fatal(err)
	}
	_, err = lg.PublishGroups(ctx, []eventlog.Group{{SID: "sb", Last: seqs[1], Lines: mkLines(2, 10, "b2-")}, {SID: "sa", Last: seqs[0], Lines: more[1:]}})
	if !errors.Is(err, eventlog.ErrWrongLastSequence) {
		t.Fatalf("stale group: %v, want ErrWrongLastSequence", err)
	}
	if n := len(readAll(t, lg, "sb")); n != len(b) {
		t.Fatalf("sb holds %d events after a failed batch, want %d", n, len(b))
	}
	if n := len(readAll(t, lg, "sa")); n != len(a)+1 {
		t.Fatalf("sa holds %d events after a failed batch, want %d", n, len(a)+1)
	}
}
