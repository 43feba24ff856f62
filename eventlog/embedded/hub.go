package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// HubDomain is the JetStream domain of the hub cluster.
const HubDomain = "hub"

// HubConfig describes one hub node: a NATS server that workstations join as
// leaf nodes, holding PI_HUB in JetStream domain "hub".
type HubConfig struct {
	// StateDir holds the store (StateDir/jetstream) and the lock.
	StateDir string
	// Name is the server name, unique in the cluster.
	Name string
	// Listen is the client listener "host:port" (admin tools, plain-client
	// forwarders). Empty: none.
	Listen string
	// LeafListen is the leaf-node listener workstations dial, "host:port".
	LeafListen string
	// ClusterName, ClusterListen and Routes make the hub one node of a
	// cluster (three for R3). Empty ClusterListen: a single hub.
	ClusterName   string
	ClusterListen string
	Routes        []string
	MaxMemory     int64
	MaxStore      int64
	Logger        *slog.Logger
	Trace         bool
}

func hostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	if n == 0 {
		n = server.RANDOM_PORT
	}
	if h == "" {
		h = "0.0.0.0"
	}
	return h, n, nil
}

// StartHub locks cfg.StateDir and starts a hub node in it.
func StartHub(ctx context.Context, cfg HubConfig) (*Server, error) {
	if cfg.StateDir == "" || cfg.Name == "" {
		return nil, errors.New("embedded: hub: StateDir and Name are required")
	}
	if cfg.LeafListen == "" {
		return nil, errors.New("embedded: hub: a leaf listener is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = DefaultMaxMemory
	}
	if cfg.MaxStore == 0 {
		cfg.MaxStore = DefaultMaxStore
	}
	opts := &server.Options{
		ServerName:         cfg.Name,
		NoSigs:             true,
		DontListen:         cfg.Listen == "",
		JetStream:          true,
		StoreDir:           cfg.StateDir,
		JetStreamDomain:    HubDomain,
		JetStreamMaxMemory: cfg.MaxMemory,
		JetStreamMaxStore:  cfg.MaxStore,
		SyncAlways:         true,
		SyncInterval:       2 * time.Minute,
		MaxPayload:         maxPayload,
	}
	var err error
	if cfg.Listen != "" {
		if opts.Host, opts.Port, err = hostPort(cfg.Listen); err != nil {
			return nil, fmt.Errorf("embedded: hub listen %q: %w", cfg.Listen, err)
		}
	}
	if opts.LeafNode.Host, opts.LeafNode.Port, err = hostPort(cfg.LeafListen); err != nil {
		return nil, fmt.Errorf("embedded: hub leaf listen %q: %w", cfg.LeafListen, err)
	}
	if cfg.ClusterListen != "" {
		if cfg.ClusterName == "" {
			return nil, errors.New("embedded: hub: a cluster needs a name")
		}
		opts.Cluster.Name = cfg.ClusterName
		if opts.Cluster.Host, opts.Cluster.Port, err = hostPort(cfg.ClusterListen); err != nil {
			return nil, fmt.Errorf("embedded: hub cluster listen %q: %w", cfg.ClusterListen, err)
		}
		for _, r := range cfg.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("embedded: hub route %q: want nats://host:port", r)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, server.JetStreamStoreDir), 0o700); err != nil {
		return nil, fmt.Errorf("embedded: hub store dir: %w", err)
	}
	lock, err := lockDir(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	s := &Server{logger: newNATSLogger(cfg.Logger), lock: lock}
	if err := s.launch(ctx, opts, cfg.Logger, cfg.Trace); err != nil {
		if s.ns != nil {
			s.shutdown()
		}
		lock.release()
		return nil, fmt.Errorf("embedded: hub: %w", err)
	}
	if cfg.Listen != "" {
		s.clientURL = "nats://" + s.ns.Addr().String()
	}
	return s, nil
}

// LeafURL is the URL workstations put in PISYNC_HUB_URLS ("" on a
// workstation server).
func (s *Server) LeafURL() string {
	if s.ns == nil {
		return ""
	}
	v, err := s.ns.Varz(nil)
	if err != nil || v.LeafNode.Port <= 0 {
		return ""
	}
	host := v.LeafNode.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(v.LeafNode.Port))
}
