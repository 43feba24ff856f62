package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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

// TestDaemonStateDirNotOurs: the daemon refuses a state dir open to
// others that holds what pisyncd did not make, leaving it as it was. The
// server's own check (TestStateDirNotOursLeftAlone) came after the node
// id was written into the folder, and took it for pisyncd's (a verifying
// probe on 2026-12-07).
func TestDaemonStateDirNotOurs(t *testing.T) {
	cfg := stationConfig(t, "ws-a", "")
	cfg.HubURLs = nil
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.StateDir, "notes.txt"), []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDaemon(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		d.Close()
		t.Fatal("started in someone's folder open to others")
	}
	if !strings.Contains(err.Error(), "holds what pisyncd did not make (notes.txt)") {
		t.Errorf("the refusal: %v", err)
	}
	if st, _ := os.Stat(cfg.StateDir); st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v after a refused start, was 0755", st.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "node-id")); err == nil {
		t.Error("a node-id was left in the folder")
	}
}
