// Package jstest starts an embedded server for a test and gives it an
// in-process JetStream, both closed when the test ends. (Not in testenv,
// which eventlog/embedded's own tests import.)
package jstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// Start starts a server with cfg (a state dir of the test's and node "n1"
// where cfg leaves them empty) and connects to it in process.
func Start(tb testing.TB, cfg embedded.Config) (*embedded.Server, jetstream.JetStream) {
	tb.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = tb.TempDir()
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "n1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := embedded.Start(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	nc, err := srv.Connect()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close) // before the server's Close (LIFO)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return srv, js
}
