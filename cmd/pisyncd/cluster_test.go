package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// testHub is a hub node in the test process, restartable on the same port.
type testHub struct {
	t    *testing.T
	dir  string
	leaf string // host:port
	srv  *embedded.Server
	// storeCipher encrypts the hub's store at rest (PISYNC_HUB_STORE_CIPHER).
	storeCipher string
}

func startTestHub(t *testing.T) *testHub {
	h := &testHub{t: t, dir: t.TempDir(), leaf: testenv.FreeAddr(t)}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func (h *testHub) start() {
	h.t.Helper()
	srv, err := StartHub(context.Background(), &config.Hub{
		Name: "hub-1", StateDir: h.dir, LeafListen: h.leaf, Replicas: 1, MaxStore: 1 << 30, Open: true,
		StoreCipher: h.storeCipher,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		h.t.Fatalf("hub: %v", err)
	}
	h.srv = srv
}

func (h *testHub) stop() {
	if h.srv != nil {
		h.srv.Close()
		h.srv = nil
	}
}

func (h *testHub) url() string { return "nats://" + h.leaf }

// station is one workstation daemon in the test process.
type station struct {
	t      *testing.T
	name   string
	cfg    *config.Config
	d      *Daemon
	cancel context.CancelFunc
	done   chan error
	logs   io.Writer // a copy of the log, when set
}

func newStation(t *testing.T, name, hubURL, pathMap string) *station {
	cfg := stationConfig(t, name, hubURL)
	cfg.PathMap = pathMap
	return runStation(t, cfg)
}

// stationConfig is a workstation's configuration for in-process tests:
// its own home, fast rescans and a short idle wait.
func stationConfig(t *testing.T, name, hubURL string) *config.Config {
	home := t.TempDir()
	return &config.Config{
		SessionsDir: filepath.Join(home, "sessions"), StateDir: filepath.Join(home, "state"), NodeID: name,
		LogLevel: "warn", LogFormat: "text", HubURLs: []string{hubURL}, Delete: "trash",
		IdleAfter: 150 * time.Millisecond, RescanInterval: 200 * time.Millisecond, MaxLine: 64 << 20,
		MaxStore: 1 << 30, MaxMemory: 64 << 20, Workers: 4, ShutdownTimeout: 10 * time.Second,
		// Under -race, sync.Pool drops a quarter of what is put back, so
		// nats-server's S2 writer, which compresses (auto: frames) every
		// flush of the link, allocates a fresh 1.2 MB buffer about every
		// fourth one: a line one by one to the hub took 57 ms instead of
		// 1.4 ms without -race. The deployed default, auto, is tested by
		// TestReplicationRoundTrip and the Docker tests.
		HubCompression: "off",
	}
}

// runStation starts a daemon with cfg, stopped when the test ends.
func runStation(t *testing.T, cfg *config.Config) *station {
	s := &station{t: t, name: cfg.NodeID, cfg: cfg}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *station) start() {
	s.t.Helper()
	lvl, _ := s.cfg.SlogLevel()
	var out io.Writer = &testLogWriter{t: s.t, prefix: s.name}
	if s.logs != nil {
		out = io.MultiWriter(out, s.logs)
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: lvl}))
	d, err := OpenDaemon(context.Background(), s.cfg, logger)
	if err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.d, s.cancel, s.done = d, cancel, make(chan error, 1)
	go func() { s.done <- d.Run(ctx) }()
}

func (s *station) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	if err := <-s.done; err != nil {
		s.t.Errorf("%s: run: %v", s.name, err)
	}
	if err := s.d.Close(); err != nil {
		s.t.Errorf("%s: close: %v", s.name, err)
	}
	s.cancel = nil
}

type testLogWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	all    bytes.Buffer // every line written, for String
}

func (w *testLogWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Logf("%s: %s", w.prefix, bytes.TrimSpace(b))
	w.all.Write(b)
	return len(b), nil
}

// String is every line written so far.
func (w *testLogWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// sessionFiles maps every *.jsonl under the station's sessions dir (hidden
// folders left out) to its lines.
func (s *station) sessionFiles() map[string][]string {
	out := map[string][]string{}
	filepath.WalkDir(s.cfg.SessionsDir, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if de.IsDir() && strings.HasPrefix(de.Name(), ".") {
			return filepath.SkipDir
		}
		if !de.IsDir() && strings.HasSuffix(p, ".jsonl") {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(s.cfg.SessionsDir, p)
			out[rel] = splitLines(string(b))
		}
		return nil
	})
	return out
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lineSet is a file's lines without its header, as a sorted set of hashes.
func lineSet(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, `"type":"session"`) {
			continue
		}
		out = append(out, fmt.Sprintf("%x", sha256.Sum256([]byte(l))))
	}
	sort.Strings(out)
	return out
}

func waitUntil(t *testing.T, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	testenv.WaitFor(t, d, cond)
}

func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

func hdrLine(sid, cwd string) string { return testenv.HeaderAt(sid, cwd, "2026-11-30T00:00:00.000Z") }

func msgLine(id, parent, text string) string {
	return testenv.EntryAt(id, parent, "2026-11-30T00:00:01.000Z", text)
}
