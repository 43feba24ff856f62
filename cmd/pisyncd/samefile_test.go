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

// TestSameFileOnTwoMachines: one session file on two machines before either
// ran pisyncd (copied with rsync, say, or a new state dir over old files),
// so each publishes its lines as its own. An entry is its session, id and
// bytes: each machine's catalog counts every entry, token and cent once,
// and lists no collision (the same id with other bytes) where there is
// none. Both files stay as they were.
func TestSameFileOnTwoMachines(t *testing.T) {
	hub := startTestHub(t)
	const sid = "0199ffff-0000-7000-8000-00000000dd01"
	lines := []string{
		testenv.HeaderAt(sid, "/home/u/same", "2026-11-29T23:08:16.463Z"),
		`{"type":"message","id":"m1","parentId":null,"timestamp":"2026-11-29T23:08:17.000Z","message":{"role":"user","content":"hello","timestamp":1}}`,
		`{"type":"message","id":"m2","parentId":"m1","timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"provider":"p","model":"m","usage":{"totalTokens":1500,"cost":{"total":0.0105}},"timestamp":2}}`,
	}
	rel := filepath.Join("--home-u-same--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
	var stations []*station
	for _, name := range []string{"ws-a", "ws-b"} {
		cfg := stationConfig(t, name, hub.url())
		mustWriteLines(t, filepath.Join(cfg.SessionsDir, rel), lines)
		stations = append(stations, runStation(t, cfg))
	}
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
}
