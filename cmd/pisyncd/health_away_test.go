package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestHealthSessionsDirAway: while the sessions dir is away (moved,
// unmounted), the daemon follows nothing. Proves that /healthz says so,
// and ok again once it is back. Before, status said "away" but /healthz
// answered ok and no metric showed it (an operations probe on 2026-12-07).
func TestHealthSessionsDirAway(t *testing.T) {
	cfg := stationConfig(t, "ws-a", "")
	cfg.HubURLs = nil
	s := runStation(t, cfg)
	writeSession(t, s, "0199aaaa-0001-7000-8000-000000000001", 1)
	writeSession(t, s, "0199aaaa-0002-7000-8000-000000000002", 1)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := s.status()
		return err == nil && st.Tailer.LinesPublished == 4, fmt.Sprintf("%+v (%v)", st.Tailer, err)
	})
	if why := s.d.unhealthy(); why != "" {
		t.Fatalf("unhealthy before: %s", why)
	}
	moved := cfg.SessionsDir + ".moved"
	if err := os.Rename(cfg.SessionsDir, moved); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		why := s.d.unhealthy()
		return strings.Contains(why, "is away"), "unhealthy: " + why
	})
	if err := os.Rename(moved, cfg.SessionsDir); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		why := s.d.unhealthy()
		return why == "", "unhealthy: " + why
	})
}
