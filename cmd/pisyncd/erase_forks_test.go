package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEraseNamesForks: erasing a session that was forked here says which
// sessions were forked from it: pi copied its lines into them, and erase
// leaves them. Before, it said nothing, and the secret stayed in the fork.
func TestEraseNamesForks(t *testing.T) {
	cfg := stationConfig(t, "ws-forks", "")
	cfg.HubURLs = nil
	s := runStation(t, cfg)
	parent, fork := "0199ffff-0000-7000-8000-000000000061", "0199ffff-0000-7000-8000-000000000062"
	pPath := filepath.Join(cfg.SessionsDir, sessionRel("/work/f", parent))
	mustWriteLines(t, pPath, []string{hdrLine(parent, "/work/f"), msgLine("e1", "", "key "+leaked)})
	fHeader := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00.000Z","cwd":"/work/f","parentSession":%q}`, fork, pPath)
	mustWriteLines(t, filepath.Join(cfg.SessionsDir, sessionRel("/work/f", fork)), []string{fHeader, msgLine("e1", "", "key "+leaked)})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		cat, err := s.d.proj.Catalog(context.Background())
		n := 0
		for _, c := range cat {
			if c.SessionID == fork && c.Forked || c.SessionID == parent {
				n++
			}
		}
		return err == nil && n == 2, fmt.Sprintf("catalog: %+v %v", cat, err)
	})
	stationEnv(t, cfg)
	var out bytes.Buffer
	if err := eraseCommand([]string{parent}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "session "+fork+" was forked from it") {
		t.Errorf("erase of a forked session:\n%s", out.String())
	}
	res, err := eraseViaDaemon(context.Background(), cfg, fork)
	if err != nil || len(res.Forks) != 0 {
		t.Errorf("erase of the fork: %+v %v", res, err)
	}
}
