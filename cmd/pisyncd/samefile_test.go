package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/projection"
)

// TestSameFileOnTwoMachines: one session file on two machines (copied with
// rsync, say) while the hub is out of reach, so each publishes its lines
// as its own. An entry is its session, id and bytes: each machine's
// catalog counts every entry, token and cent once, and lists no collision
// (the same id with other bytes) where there is none. Both files stay as
// they were. A third machine whose state dir is made over the same file
// publishes none of its lines: they are on the hub already, the first
// two's (its first read waits for the hub's lines, waitFirstCopy).
func TestSameFileOnTwoMachines(t *testing.T) {
	hub := startTestHub(t)
	const sid = "0199ffff-0000-7000-8000-00000000dd01"
	lines := []string{
		testenv.HeaderAt(sid, "/home/u/same", "2026-11-29T23:08:16.463Z"),
		`{"type":"message","id":"m1","parentId":null,"timestamp":"2026-11-29T23:08:17.000Z","message":{"role":"user","content":"hello","timestamp":1}}`,
		`{"type":"message","id":"m2","parentId":"m1","timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"provider":"p","model":"m","usage":{"totalTokens":1500,"cost":{"total":0.0105}},"timestamp":2}}`,
	}
	rel := filepath.Join("--home-u-same--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
	hub.stop()
	var stations []*station
	for _, name := range []string{"ws-a", "ws-b"} {
		s := runStation(t, stationConfig(t, name, hub.url()))
		// Written after the state dir was made: this machine's own work,
		// published at once, the hub out of reach or not.
		mustWriteLines(t, filepath.Join(s.cfg.SessionsDir, rel), lines)
		stations = append(stations, s)
	}
	for _, s := range stations {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			st, err := s.status()
			return err == nil && st.Stream.Messages == 3, fmt.Sprintf("%s's PI_LOCAL holds %d (%v), want 3", s.name, st.Stream.Messages, err)
		})
	}
	hub.start()
	// entry is s's catalog entry of the session, nil while it has none.
	entry := func(s *station) (*projection.CatalogEntry, error) {
		cat, err := s.d.proj.Catalog(t.Context())
		for i := range cat {
			if cat[i].SessionID == sid {
				return &cat[i], err
			}
		}
		return nil, err
	}
	for _, s := range stations {
		// Both machines' lines have reached s once its catalog names both.
		waitUntil(t, 30*time.Second, func() (bool, string) {
			c, err := entry(s)
			if c == nil {
				return false, fmt.Sprintf("%s: the session is not in the catalog (%v)", s.name, err)
			}
			return slices.Equal(c.Nodes, []string{"ws-a", "ws-b"}), fmt.Sprintf("%s's catalog: nodes %v", s.name, c.Nodes)
		})
	}
	for _, s := range stations {
		// The views are written a flush after the lines; wait for the last
		// one's count to settle, then check every figure.
		waitUntil(t, 30*time.Second, func() (bool, string) {
			c, err := entry(s)
			if c == nil {
				return false, fmt.Sprintf("%s: the session is not in the catalog (%v)", s.name, err)
			}
			got := fmt.Sprintf("entries %d, messages %d, tokens %g, cost %.4f, collisions %v", c.Entries, c.Messages, c.Tokens, c.Cost, c.Collisions)
			return got == "entries 2, messages 2, tokens 1500, cost 0.0105, collisions []", s.name + "'s catalog: " + got
		})
		st, err := s.status()
		if err != nil {
			t.Fatal(err)
		}
		if n := st.Replicator.Collisions; n != 0 {
			t.Errorf("%s's status: %d entry id collisions, want 0", s.name, n)
		}
		if f := s.sessionFiles()[rel]; !reflect.DeepEqual(f, lines) {
			t.Errorf("%s's file changed: %q", s.name, f)
		}
	}

	cfg := stationConfig(t, "ws-c", hub.url())
	mustWriteLines(t, filepath.Join(cfg.SessionsDir, rel), lines)
	c := runStation(t, cfg)
	select {
	case <-c.d.tailer.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("ws-c did not read its session files")
	}
	if st, err := c.status(); err != nil || st.Stream.Messages != 0 {
		t.Errorf("ws-c published %d lines (%v), want none: they are the other machines'", st.Stream.Messages, err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		e, err := entry(c)
		if e == nil {
			return false, fmt.Sprintf("ws-c: the session is not in the catalog (%v)", err)
		}
		got := fmt.Sprintf("nodes %v, entries %d, tokens %g", e.Nodes, e.Entries, e.Tokens)
		return got == "nodes [ws-a ws-b], entries 2, tokens 1500", "ws-c's catalog: " + got
	})
	if f := c.sessionFiles()[rel]; !reflect.DeepEqual(f, lines) {
		t.Errorf("ws-c's file changed: %q", f)
	}
}
