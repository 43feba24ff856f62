package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// hubCommand runs one hub node until a signal.
func hubCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
		fmt.Fprintln(stdout, "pisyncd hub: a node of the hub cluster that workstations join as leaf nodes.\n\nSettings:")
		return config.HubUsage(stdout)
	}
	if len(args) > 0 {
		return fmt.Errorf("%w: pisyncd hub takes no arguments; settings are PISYNC_HUB_* variables (pisyncd hub help)", errUsage)
	}
	cfg, err := config.LoadHub()
	if err != nil {
		return err
	}
	logger := cfg.Logging().Logger(stderr)
	ctx, stop := signalContext(stderr)
	defer stop()
	h, err := StartHub(ctx, cfg, logger.With("component", "nats"))
	if err != nil {
		return err
	}
	logger.Info("hub running", "name", cfg.Name, "leaf", cfg.LeafListen, "client", cfg.Listen, "cluster", cfg.ClusterListen, "replicas", cfg.Replicas)
	select {
	case <-ctx.Done():
	case <-h.Failed():
		err = h.Err()
	}
	return errors.Join(err, h.Close())
}

// StartHub starts a hub node and makes sure PI_HUB exists (on a cluster,
// once the cluster has a JetStream leader).
func StartHub(ctx context.Context, cfg *config.Hub, logger *slog.Logger) (*embedded.Server, error) {
	srv, err := embedded.StartHub(ctx, embedded.HubConfig{
		StateDir: cfg.StateDir, Name: cfg.Name, Listen: cfg.Listen, LeafListen: cfg.LeafListen,
		ClusterName: cfg.ClusterName, ClusterListen: cfg.ClusterListen, Routes: cfg.Routes,
		MaxStore: int64(cfg.MaxStore), Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	nc, err := srv.Connect(nats.Name("pisyncd-hub"))
	if err != nil {
		srv.Close()
		return nil, err
	}
	defer nc.Close()
	// A cluster elects its JetStream leader once enough nodes are up.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := ensureHubStream(sctx, nc, cfg.Replicas); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

func ensureHubStream(ctx context.Context, nc *nats.Conn, replicas int) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := eventlog.EnsureStream(cctx, js, eventlog.HubStreamConfig(replicas))
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hub: PI_HUB: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
