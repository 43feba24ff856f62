package embedded

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func testConfig(tb testing.TB, dir string) Config {
	tb.Helper()
	return Config{
		StateDir:  dir,
		NodeID:    "test",
		MaxMemory: 16 << 20,
		MaxStore:  256 << 20,
		Logger:    slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// testWriter sends server warnings and errors to the test log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(string(p))
	return len(p), nil
}

// startServer starts a server and closes it at the end of the test.
func startServer(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s, err := Start(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func connect(tb testing.TB, s *Server) *nats.Conn {
	tb.Helper()
	nc, err := s.Connect()
	if err != nil {
		tb.Fatalf("Connect: %v", err)
	}
	tb.Cleanup(nc.Close) // runs before the server's Close (LIFO)
	return nc
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// runWatch makes a store watch of s with o and runs it until the returned
// stop (which may be called more than once; the test's end calls it too),
// which checks that Run ended without an error.
func runWatch(tb testing.TB, s *Server, o StoreWatchOptions) (w *StoreWatch, stop func()) {
	tb.Helper()
	w, err := s.WatchStore(o)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("Run: %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	return w, stop
}

// createStream makes a file-backed stream on "<name>.>".
func createStream(tb testing.TB, js jetstream.JetStream, name string) jetstream.Stream {
	tb.Helper()
	st, err := js.CreateStream(testCtx(tb), jetstream.StreamConfig{
		Name:     name,
		Subjects: []string{name + ".>"},
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		tb.Fatalf("CreateStream: %v", err)
	}
	return st
}

// waitFor polls cond until it holds or the deadline passes. Polling with a
// deadline, not sleeping, is how tests wait for asynchronous effects.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
}
