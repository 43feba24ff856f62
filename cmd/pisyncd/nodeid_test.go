package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNodeIDFileDamaged: a state dir's node-id file changed under its
// store (cut short to another valid id, or edited) is refused at start,
// naming the store's id and how to put it back; the store is not touched.
// Before, the daemon took the new id and published every session file
// again, as new lines of a new node (a crash probe on 2026-12-06: 23,482
// lines twice). An id no longer valid at all names the fix too.
func TestNodeIDFileDamaged(t *testing.T) {
	cfg := stationConfig(t, "aef0123e-3b", "")
	cfg.HubURLs = nil
	s := runStation(t, cfg)
	writeSession(t, s, "0199aaaa-0000-7000-8000-0000000000aa", 3)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, err := s.d.status(t.Context())
		return err == nil && st.Tailer.LinesPublished == 4, fmt.Sprintf("%+v %v", st.Tailer, err)
	})
	s.stop()

	file := filepath.Join(cfg.StateDir, "node-id")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, damaged := range []string{"aef0123e-3", "other-node"} {
		if err := os.WriteFile(file, []byte(damaged), 0o600); err != nil {
			t.Fatal(err)
		}
		c := *cfg
		c.NodeID = ""
		d, err := OpenDaemon(context.Background(), &c, logger)
		if err == nil {
			d.Close()
			t.Fatalf("node-id %q over aef0123e-3b's store: the daemon opened", damaged)
		}
		if msg := err.Error(); !strings.Contains(msg, `holds the lines of node "aef0123e-3b"`) || !strings.Contains(msg, "printf") {
			t.Errorf("node-id %q over aef0123e-3b's store: %v", damaged, err)
		}
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := *cfg
	c.NodeID = ""
	if _, err := OpenDaemon(context.Background(), &c, logger); err == nil || !strings.Contains(err.Error(), "write this node's id back") {
		t.Errorf("an empty node-id file: %v", err)
	}

	// With the id put back, it starts and publishes nothing again.
	if err := os.WriteFile(file, []byte("aef0123e-3b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, err := s.d.status(t.Context())
		return err == nil && st.Tailer.FilesTracked == 1, fmt.Sprintf("%+v %v", st.Tailer, err)
	})
	st, err := s.d.status(t.Context())
	if err != nil || st.Tailer.LinesPublished != 0 {
		t.Errorf("after the id was put back: %+v %v", st.Tailer, err)
	}
}

// TestFailedFirstStartKeepsNoNodeID: a first start that fails before the
// store is made (here a seed file that is not there) leaves no node id in
// the state dir, and the next start under the id the hub knows goes
// ahead. Before, the random id stayed, and that start was refused: the
// state dir "belongs to" the random id, "the lines in its store were
// published under that id", when there was no store (a newcomer probe,
// 2026-12-07).
func TestFailedFirstStartKeepsNoNodeID(t *testing.T) {
	cfg := stationConfig(t, "", "tls://127.0.0.1:1")
	cfg.HubNkey = filepath.Join(t.TempDir(), "missing.nkey")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if d, err := OpenDaemon(context.Background(), cfg, logger); err == nil {
		d.Close()
		t.Fatal("opened with a seed file that is not there")
	} else if !strings.Contains(err.Error(), "PISYNC_HUB_NKEY") {
		t.Fatalf("the error: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.StateDir, "node-id")); err == nil {
		t.Fatalf("a failed first start left node id %q", b)
	}
	c := *cfg
	c.NodeID, c.HubNkey, c.HubURLs = "ann-laptop", "", nil
	d, err := OpenDaemon(context.Background(), &c, logger)
	if err != nil {
		t.Fatalf("the start under the hub's id: %v", err)
	}
	d.Close()
}
