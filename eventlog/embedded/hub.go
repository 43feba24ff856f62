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
	"sort"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/pisyncd/pisyncd/internal/fsutil"
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
	// TLS, when set, secures the client, leaf and route listeners.
	TLS *HubTLS
	// Auth requires every connection to authenticate: the nodes
	// registered in NodesDir (AddNode), each with its nkey, in its team's
	// account, with NodePermissions. Without Auth anyone may connect.
	Auth     bool
	NodesDir string
	Logger   *slog.Logger
	Trace    bool
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
	for _, a := range []string{cfg.Listen, cfg.LeafListen, cfg.ClusterListen} {
		if a != "" {
			if _, _, err := hostPort(a); err != nil {
				return nil, fmt.Errorf("embedded: hub listen %q: %w", a, err)
			}
		}
	}
	if cfg.ClusterListen != "" && cfg.ClusterName == "" {
		return nil, errors.New("embedded: hub: a cluster needs a name")
	}
	for _, r := range cfg.Routes {
		if u, err := url.Parse(r); err != nil || u.Host == "" {
			return nil, fmt.Errorf("embedded: hub route %q: want nats://host:port", r)
		}
	}
	if cfg.Auth && cfg.NodesDir == "" {
		return nil, errors.New("embedded: hub: authorization needs a nodes dir")
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, server.JetStreamStoreDir), 0o700); err != nil {
		return nil, fmt.Errorf("embedded: hub store dir: %w", err)
	}
	lock, err := lockDir(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	s := &Server{logger: newNATSLogger(cfg.Logger), lock: lock, hub: &cfg, admins: map[string]nkeys.KeyPair{}}
	opts, err := s.hubOptions()
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("embedded: hub: %w", err)
	}
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

// hubOptions renders the hub's configuration file (registered nodes
// included), writes it into the state dir and loads it.
func (s *Server) hubOptions() (*server.Options, error) {
	cfg := *s.hub
	var nodes []Node
	admins := map[string]string{}
	if cfg.Auth {
		var err error
		if nodes, err = LoadNodes(cfg.NodesDir); err != nil {
			return nil, err
		}
		teams := map[string]bool{DefaultTeam: true}
		for _, n := range nodes {
			teams[n.Team] = true
		}
		for t := range teams {
			kp := s.admins[t]
			if kp == nil {
				var err error
				if kp, err = nkeys.CreateUser(); err != nil {
					return nil, err
				}
				s.admins[t] = kp
			}
			pub, _ := kp.PublicKey()
			admins[t] = pub
		}
		s.inProcessKey = s.admins[DefaultTeam]
	}
	path := filepath.Join(cfg.StateDir, "hub.conf")
	if err := fsutil.WriteFileAtomic(path, []byte(RenderHubConfig(cfg, nodes, admins))); err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	opts.NoSigs = true
	opts.SyncAlways = true // what sync_interval: always sets in a file
	// A config file has no way to say "no client listener": without
	// one, nats-server listens on 0.0.0.0:4222.
	opts.DontListen = cfg.Listen == ""
	s.nodes = nodes
	return opts, nil
}

// Reload re-reads the registered nodes (after `pisyncd hub add-node`) and
// applies them to the running hub without dropping connections.
func (s *Server) Reload() error {
	if s.hub == nil {
		return errors.New("embedded: reload: not a hub")
	}
	opts, err := s.hubOptions()
	if err != nil {
		return fmt.Errorf("embedded: reload: %w", err)
	}
	if err := s.ns.ReloadOptions(opts); err != nil {
		return fmt.Errorf("embedded: reload: %w", err)
	}
	return nil
}

// Teams lists the accounts with registered nodes (always the default one
// with authorization on); empty without authorization.
func (s *Server) Teams() []string {
	var out []string
	for t := range s.admins {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// ConnectTeam opens an in-process admin connection to a team's account.
func (s *Server) ConnectTeam(team string, opts ...nats.Option) (*nats.Conn, error) {
	kp := s.admins[team]
	if kp == nil {
		return nil, fmt.Errorf("embedded: no account for team %q", team)
	}
	pub, _ := kp.PublicKey()
	opts = append(opts, nats.InProcessServer(s.ns), nats.Nkey(pub, kp.Sign))
	return nats.Connect("", opts...)
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
