package eventlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

func TestReadFilteredEmptyAndWildcard(t *testing.T) {
	lg := openLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	err := eventlog.ReadFiltered(ctx, lg.JetStream(), eventlog.LocalStream, "pi.evt.*.nothing", 100, true, func(*eventlog.Event) error { n++; return nil })
	if err != nil || n != 0 {
		t.Fatalf("empty filter: %d events, %v", n, err)
	}
	if _, _, err := lg.Publish(ctx, "s1", 0, mkLines(3, 10, "a")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lg.Publish(ctx, "s2", 0, mkLines(2, 10, "b")); err != nil {
		t.Fatal(err)
	}
	err = eventlog.ReadFiltered(ctx, lg.JetStream(), eventlog.LocalStream, "pi.evt.*.s1", 100, true, func(ev *eventlog.Event) error {
		if ev.SID != "s1" {
			t.Errorf("event of %s", ev.SID)
		}
		n++
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("wildcard filter: %d events, %v", n, err)
	}
}
