package main

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHubHTTP: a hub node with PISYNC_HUB_HTTP_ADDR answers /healthz to
// anyone, and /metrics only with the token of its state dir (0600): the
// workstations linked, each team's store and share, the process's own
// figures. Before, a hub had neither (a soak probe, 2026-12-07).
func TestHubHTTP(t *testing.T) {
	hub := startTestHub(t)
	cfg := &config.Hub{StateDir: hub.dir, HTTPAddr: testenv.FreeAddr(t)}
	stop, err := serveHubHTTP(cfg, hub.srv, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + cfg.HTTPAddr
	get := func(method, path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("GET", "/healthz", ""); code != 200 || body != "ok\n" {
		t.Errorf("GET /healthz: %d %q", code, body)
	}
	if code, _ := get("HEAD", "/healthz", ""); code != 200 {
		t.Errorf("HEAD /healthz: %d", code)
	}
	tokenPath := filepath.Join(hub.dir, hubMetricsTokenFile)
	st, err := os.Stat(tokenPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v %v, want 0600", st, err)
	}
	raw, _ := os.ReadFile(tokenPath)
	token := strings.TrimSpace(string(raw))
	for _, bad := range []string{"", "Bearer nope", "Basic " + token, token} {
		if code, body := get("GET", "/metrics", bad); code != http.StatusUnauthorized || !strings.Contains(body, hubMetricsTokenFile) {
			t.Errorf("GET /metrics with %q: %d %q, want 401 naming the token file", bad, code, body)
		}
	}
	metrics := func() string {
		code, body := get("GET", "/metrics", "bearer "+token) // the scheme in any case
		if code != 200 {
			t.Fatalf("GET /metrics with the token: %d %q", code, body)
		}
		return body
	}
	for _, want := range []string{"pisyncd_hub_leaf_links 0", `pisyncd_hub_team_store_bytes{team="$G"}`, `pisyncd_hub_team_store_limit_bytes{team="$G"}`,
		"pisyncd_hub_team_scrape_errors 0", "process_resident_memory_bytes", "pisyncd_build_info"} {
		if body := metrics(); !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	newStation(t, "ws-a", hub.url(), "")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(metrics(), "pisyncd_hub_leaf_links 1\n"), "a workstation linked, the hub's metrics say no leaf link"
	})
	stop()
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the hub's HTTP listener answers after stop")
	}
}
