package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHubURLCredentialsRedacted: hub URLs with a password and with a token
// never show them: not in `pisyncd status` (text and --json), not in the
// daemon's log at debug level (the embedded server's included) while the
// leaf fails on one URL and connects on the other, and not in the error for
// a URL that does not parse.
func TestHubURLCredentialsRedacted(t *testing.T) {
	h := startTestHub(t)
	cfg := stationConfig(t, "ws-r", "nats://ann:s3cret@"+h.leaf)
	cfg.HubURLs = append(cfg.HubURLs, "nats://t0ken@"+testenv.FreeAddr(t)) // nobody listens there
	cfg.LogLevel = "debug"
	secrets := []string{"s3cret", "t0ken"}
	s, log := loggedStationAt(t, cfg, slog.LevelDebug)
	d := s.d
	writeSession(t, s, "redact-session", 2)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, _ := d.status(t.Context())
		return st.Forwarder != nil && st.Forwarder.Forwarded == 3, fmt.Sprintf("%+v", st.Forwarder)
	})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(log.String(), "leafnode"), "no leaf connection attempt in the log yet"
	})

	t.Setenv("PISYNC_SESSIONS_DIR", cfg.SessionsDir)
	t.Setenv("PISYNC_STATE_DIR", cfg.StateDir)
	t.Setenv("PISYNC_NODE_ID", cfg.NodeID)
	t.Setenv("PISYNC_HUB_URLS", strings.Join(cfg.HubURLs, ","))
	for _, args := range [][]string{nil, {"--json"}} {
		var out bytes.Buffer
		if err := statusCommand(args, &out); err != nil {
			t.Fatalf("status %v: %v", args, err)
		}
		if !strings.Contains(out.String(), "nats://REDACTED@127.0.0.1") {
			t.Errorf("status %v does not show the redacted hub URLs:\n%s", args, out.String())
		}
		for _, sec := range secrets {
			if strings.Contains(out.String(), sec) {
				t.Errorf("status %v prints %q:\n%s", args, sec, out.String())
			}
		}
	}
	for _, sec := range secrets {
		if strings.Contains(log.String(), sec) {
			t.Errorf("the log holds %q:\n%s", sec, log.String())
		}
	}

	bad := stationConfig(t, "ws-r2", "nats://ann:s3 cret@127.0.0.1:1")
	if _, err := OpenStore(context.Background(), bad, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a URL that does not parse was accepted")
	} else if strings.Contains(err.Error(), "cret") {
		t.Errorf("the error prints the password: %v", err)
	}
}
