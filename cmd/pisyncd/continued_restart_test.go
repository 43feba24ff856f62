package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/projection"
)

// catalogOf is station s's catalog entry of session sid (ok false while
// it has none).
func catalogOf(t *testing.T, s *station, sid string) (projection.CatalogEntry, bool) {
	t.Helper()
	cat, err := s.d.proj.Catalog(context.Background())
	if err != nil {
		return projection.CatalogEntry{}, false
	}
	for _, e := range cat {
		if e.SessionID == sid {
			return e, true
		}
	}
	return projection.CatalogEntry{}, false
}

// TestContinuedSessionAfterRestart: a session begun on A and continued on
// B keeps B's views whole across B's restart: B's own lines of it (its
// PI_LOCAL, without the header, which is A's) are read back after A's.
// Before, the rebuild fed them first, and the tree took the session for no
// pi session at all: context, ls and the web view failed on B for every
// session B had continued, after any restart.
func TestContinuedSessionAfterRestart(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	sid := "0199ffff-0000-7000-8000-0000000c0001"
	rel := sessionRel("/work/continued", sid)
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, rel), []string{hdrLine(sid, "/work/continued"), msgLine("a1", "", "begun on A"), msgLine("a2", "a1", "more on A")})
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[rel]) == 3, "B's copy" })
	appendLine(t, filepath.Join(b.cfg.SessionsDir, rel), msgLine("b1", "a2", "continued on B"))
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(a.sessionFiles()[rel]) == 4, "A has B's line" })
	whole := func(when string) {
		t.Helper()
		waitUntil(t, 30*time.Second, func() (bool, string) {
			e, ok := catalogOf(t, b, sid)
			return ok && e.Error == "" && e.Entries == 3 && string(e.LeafID) == `"b1"`, fmt.Sprintf("%s: B's catalog entry %+v", when, e)
		})
	}
	whole("before B's restart")
	b.stop()
	b.start()
	whole("after B's restart")
	var out bytes.Buffer
	if err := b.d.proj.WriteContext(context.Background(), &out, sid, "", b.d.proj.Rules()); err != nil || !strings.Contains(out.String(), `"leafId":"b1"`) {
		t.Errorf("B's context after its restart: %v\n%.300s", err, out.String())
	}
	// And when the next line comes from A, which the views apply to the
	// tree read back.
	appendLine(t, filepath.Join(a.cfg.SessionsDir, rel), msgLine("a3", "b1", "on A again"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		e, ok := catalogOf(t, b, sid)
		return ok && e.Error == "" && e.Entries == 4 && string(e.LeafID) == `"a3"`, fmt.Sprintf("after A's next line: B's catalog entry %+v", e)
	})

	// B's views made again from its streams (a projection of a new
	// format, say): both streams are read at once, and B's own lines may
	// come before A's header.
	b.stop()
	d, err := openStoreAs(context.Background(), b.cfg, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.log.JetStream().DeleteKeyValue(context.Background(), projection.Bucket); err != nil {
		t.Fatal(err)
	}
	d.Close()
	b.start()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		e, ok := catalogOf(t, b, sid)
		return ok && e.Error == "" && e.Entries == 4, fmt.Sprintf("B's views made again: its catalog entry %+v", e)
	})
}
