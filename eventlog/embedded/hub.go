package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
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
	// RouteSecret authenticates the routes: every node of the cluster
	// has the same one (PISYNC_HUB_ROUTE_SECRET). Required with
	// ClusterListen, as is TLS with a CA unless Auth is off.
	RouteSecret string
	// Replicas of PI_HUB (1, or 3 on a three-node cluster): team limits
	// are per node, and an account's usage counts every replica.
	Replicas  int
	MaxMemory int64
	MaxStore  int64
	// Team limits each team's account (with Auth).
	Team TeamLimits
	// TLS, when set, secures the client, leaf and route listeners.
	TLS *HubTLS
	// Auth requires every connection to authenticate: the nodes
	// registered in NodesDir (AddNode), each with its nkey, in its team's
	// account, with NodePermissions. Without Auth anyone may connect.
	Auth     bool
	NodesDir string
	// StoreCipher and StoreKeyFile encrypt the hub's store at rest, as
	// Config's do a workstation's.
	StoreCipher  string
	StoreKeyFile string
	Logger       *slog.Logger
	Trace        bool
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
	cfg = cfg.withHubDefaults()
	var err error
	if cfg.StoreCipher, err = ParseStoreCipher(cfg.StoreCipher); err != nil {
		return nil, fmt.Errorf("embedded: hub: %w", err)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("embedded: hub: %w", err)
	}
	if cfg.Auth && cfg.NodesDir == "" {
		return nil, errors.New("embedded: hub: authorization needs a nodes dir")
	}
	if cfg.ClusterListen != "" && (cfg.TLS == nil || cfg.TLS.CAFile == "") {
		// Only an open hub gets here (validate refuses it otherwise).
		cfg.Logger.Warn("INSECURE: cluster routes without TLS: they authenticate with the route secret, but anyone on the network path reads the secret and every line the hub nodes exchange (an open development hub, PISYNC_HUB_OPEN)", "cluster", cfg.ClusterListen)
	}
	if err := PrivateStateDir(cfg.StateDir, cfg.Logger); err != nil {
		return nil, fmt.Errorf("embedded: hub: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, server.JetStreamStoreDir), 0o700); err != nil {
		return nil, fmt.Errorf("embedded: hub store dir: %w", err)
	}
	lock, err := lockDir(cfg.StateDir, "")
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	s := newServer(cfg.Logger, cfg.Trace, lock)
	s.hub, s.admins = &cfg, map[string]nkeys.KeyPair{}
	s.storeCipher = cfg.StoreCipher
	var commitKey func() error
	if s.storeKey, commitKey, err = storeKey(cfg.StateDir, cfg.StoreCipher, cfg.StoreKeyFile, "PISYNC_HUB_STORE_CIPHER"); err != nil {
		lock.release()
		return nil, fmt.Errorf("embedded: hub: %w", err)
	}
	nodes, err := s.loadNodes()
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("embedded: hub: %w", err)
	}
	opts, err := s.hubOptions(cfg, nodes)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("embedded: hub: %w", err)
	}
	if err := s.launchFirst(ctx, opts); err != nil {
		if ns := s.nats(); ns != nil {
			shutdown(ns)
		}
		lock.release()
		return nil, fmt.Errorf("embedded: hub: %w", err)
	}
	s.setNodes(nodes)
	s.guardLinks(ctx, cfg)
	if commitKey != nil {
		// A hub node of a cluster opens its streams as the cluster
		// agrees on them, not at start: it has only the marker's check.
		if err := commitKey(); err != nil {
			s.Close()
			return nil, fmt.Errorf("embedded: hub: %w", err)
		}
	}
	if cfg.Listen != "" {
		s.clientURL = "nats://" + s.nats().Addr().String()
	}
	return s, nil
}

// loadNodes reads the registered nodes (none without authorization).
func (s *Server) loadNodes() ([]Node, error) {
	if !s.hub.Auth {
		return nil, nil
	}
	return LoadNodes(s.hub.NodesDir)
}

// hubOptions renders the hub's configuration file for cfg and nodes,
// writes it into the state dir and loads it. Each team of nodes gets an
// in-process admin key, made once and kept for the server's life.
func (s *Server) hubOptions(cfg HubConfig, nodes []Node) (*server.Options, error) {
	admins := map[string]string{}
	if cfg.Auth {
		s.adminsMu.Lock()
		defer s.adminsMu.Unlock()
		teams := teamsOf(nodes)
		for t := range s.admins {
			// A team stays once it has an account (Reload), its last node
			// removed too: its admin user stays, or the hub could no
			// longer reach its PI_HUB (erase what its nodes left, watch
			// its share).
			teams[t] = true
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
		if k := s.admins[DefaultTeam]; s.inProcessKey != k {
			// Once, at start: the key is kept for the server's life,
			// and in-process connections read it without a lock.
			s.inProcessKey = k
		}
		if s.sysKey == nil {
			kp, err := nkeys.CreateUser()
			if err != nil {
				return nil, err
			}
			s.sysKey = kp
		}
		admins[SystemAccount], _ = s.sysKey.PublicKey()
	}
	conf, err := RenderHubConfig(cfg, nodes, admins)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.StateDir, "hub.conf")
	if err := fsutil.WriteFileAtomic(path, []byte(conf)); err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	opts.NoSigs = true
	opts.SyncAlways = true // what sync_interval: always sets in a file
	// Not in the file: the key stays out of hub.conf.
	applyStoreCipher(opts, s.storeCipher, s.storeKey)
	// A config file has no way to say "no client listener": without
	// one, nats-server listens on 0.0.0.0:4222.
	opts.DontListen = cfg.Listen == ""
	return opts, nil
}

// teamsOf is the set of teams of nodes, the default team always in it.
func teamsOf(nodes []Node) map[string]bool {
	teams := map[string]bool{DefaultTeam: true}
	for _, n := range nodes {
		teams[n.Team] = true
	}
	return teams
}

// Reload re-reads the registered nodes (after `pisyncd hub add-node`) and
// applies them to the running hub without dropping connections.
//
// A new team shrinks every team's share of the store (TeamLimits). On a
// single node nats-server reserves each account's share and refuses an
// account whose share does not fit beside the others, so the existing
// teams' shares are reduced first, in a reload of their own.
func (s *Server) Reload() error {
	if s.hub == nil {
		return errors.New("embedded: reload: not a hub")
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	before := s.Nodes()
	nodes, err := s.loadNodes()
	if err != nil {
		return fmt.Errorf("embedded: reload: %w", err)
	}
	teams := teamsOf(nodes)
	var known []Node
	s.adminsMu.RLock()
	for t := range s.admins {
		teams[t] = true // a team stays once it has an account
	}
	for _, n := range nodes {
		if s.admins[n.Team] != nil {
			known = append(known, n)
		}
	}
	s.adminsMu.RUnlock()
	if len(known) < len(nodes) {
		shrink := *s.hub
		if shrink.Team.MaxStore == 0 {
			shrink.Team.MaxStore = shrink.MaxStore / int64(len(teams))
		}
		if shrink.Team.MaxMemory == 0 {
			shrink.Team.MaxMemory = shrink.MaxMemory / int64(len(teams))
		}
		if err := s.reloadWith(shrink, known); err != nil {
			return err
		}
	}
	if err := s.reloadWith(*s.hub, nodes); err != nil {
		if len(known) < len(nodes) {
			// The shares were shrunk for a team this reload does not
			// add after all: give them back, so that a reload that
			// failed leaves the hub as it was.
			if rerr := s.reloadWith(*s.hub, before); rerr != nil {
				return errors.Join(err, fmt.Errorf("embedded: reload: the teams' shares, shrunk for the new team, stay so until the hub restarts: %w", rerr))
			}
		}
		return err
	}
	s.reauthorizeLeafs(before, nodes)
	return nil
}

// reauthorizeLeafs closes the leaf connections of every team that lost a
// node, or whose node's key or team changed, in the reload from before to
// after. nats-server checks its clients again on a reload and closes those
// no longer authorized, but not its leaf connections (2.15.3:
// reloadAuthorization walks s.clients only), and every workstation
// connects as a leaf: a removed workstation stayed linked. Leafz does not
// say which key a leaf connection authenticated with, and the name a leaf
// gives is its own to choose, so every leaf of such a team is closed: the
// nodes still registered reconnect within about a second and authenticate
// again, and a removed one is refused.
func (s *Server) reauthorizeLeafs(before, after []Node) {
	now := map[string]Node{}
	for _, n := range after {
		now[n.Name] = n
	}
	teams := map[string]bool{}
	for _, n := range before {
		if m, ok := now[n.Name]; !ok || m.Nkey != n.Nkey || m.Team != n.Team {
			teams[n.Team] = true
		}
	}
	ns := s.nats()
	for team := range teams {
		lz, err := ns.Leafz(&server.LeafzOptions{Account: team})
		if err != nil {
			s.logger.log.Warn("reload: the team's leaf connections not listed, so not authenticated again: a removed node may stay linked until it reconnects", "team", team, "err", err)
			continue
		}
		for _, l := range lz.Leafs {
			ns.DisconnectClientByID(l.ID) // gone already: nothing to close
		}
		s.logger.log.Info("reload: the team's leaf connections closed, to be authenticated again (a node was removed or its key replaced)", "team", team, "connections", len(lz.Leafs))
	}
}

func (s *Server) reloadWith(cfg HubConfig, nodes []Node) error {
	s.adminsMu.RLock()
	had := maps.Clone(s.admins)
	s.adminsMu.RUnlock()
	opts, err := s.hubOptions(cfg, nodes)
	if err == nil {
		err = s.nats().ReloadOptions(opts)
	}
	if err != nil {
		// hubOptions made an admin key for each new team: the server
		// never took them, so they go (a team kept once it has an
		// account was listed by usage and erase with no nodes, and
		// reloads kept shrinking the others' shares for it).
		s.adminsMu.Lock()
		maps.DeleteFunc(s.admins, func(t string, _ nkeys.KeyPair) bool { return had[t] == nil })
		s.adminsMu.Unlock()
		return fmt.Errorf("embedded: reload: %w", err)
	}
	s.setNodes(nodes)
	return nil
}

// setNodes records the nodes the server admits now.
func (s *Server) setNodes(nodes []Node) {
	s.adminsMu.Lock()
	s.nodes = nodes
	s.adminsMu.Unlock()
}

// Nodes lists the registered nodes the server admits (as of its start or
// its last reload; none without authorization).
func (s *Server) Nodes() []Node {
	s.adminsMu.RLock()
	defer s.adminsMu.RUnlock()
	return slices.Clone(s.nodes)
}

// Teams lists the accounts with registered nodes (always the default one
// with authorization on); empty without authorization.
func (s *Server) Teams() []string {
	s.adminsMu.RLock()
	defer s.adminsMu.RUnlock()
	var out []string
	for t := range s.admins {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// adminKey is team's in-process admin key (nil: no such team).
func (s *Server) adminKey(team string) nkeys.KeyPair {
	s.adminsMu.RLock()
	defer s.adminsMu.RUnlock()
	return s.admins[team]
}

// ConnectTeam opens an in-process admin connection to a team's account.
func (s *Server) ConnectTeam(team string, opts ...nats.Option) (*nats.Conn, error) {
	kp := s.adminKey(team)
	if kp == nil {
		return nil, fmt.Errorf("embedded: no account for team %q", team)
	}
	pub, _ := kp.PublicKey()
	opts = append(reconnectOptions(), opts...)
	opts = append(opts, nats.InProcessServer(inProcess{s}), nats.Nkey(pub, kp.Sign))
	return nats.Connect("", opts...)
}

// LeafURL is the URL workstations put in PISYNC_HUB_URLS ("" on a
// workstation server).
func (s *Server) LeafURL() string {
	ns := s.nats()
	if ns == nil {
		return ""
	}
	v, err := ns.Varz(nil)
	if err != nil || v.LeafNode.Port <= 0 {
		return ""
	}
	host := v.LeafNode.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(v.LeafNode.Port))
}

// connectSystem opens pisyncd's in-process connection to the hub's system
// account (LinkGuard).
func (s *Server) connectSystem(opts ...nats.Option) (*nats.Conn, error) {
	s.adminsMu.RLock()
	kp := s.sysKey
	s.adminsMu.RUnlock()
	if kp == nil {
		return nil, errors.New("embedded: the hub has no system account user (it runs without authorization)")
	}
	pub, _ := kp.PublicKey()
	opts = append(reconnectOptions(), opts...)
	opts = append(opts, nats.InProcessServer(inProcess{s}), nats.Nkey(pub, kp.Sign))
	return nats.Connect("", opts...)
}

// guardLinks runs the hub's LinkGuard until Close.
func (s *Server) guardLinks(ctx context.Context, cfg HubConfig) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.guard = NewLinkGuard(s, NodeMaxLinks, cfg.Logger.With("component", "links"))
	s.stopGuard = func() {
		cancel()
		s.guarding.Wait()
	}
	s.guarding.Go(func() {
		if err := s.guard.Run(gctx); err != nil {
			cfg.Logger.Error("the hub does not bound each node's links: one node may take its teammates'", "err", err)
		}
	})
}

// LinksClosed is how many connections the hub closed of nodes past their
// bound (LinkGuard).
func (s *Server) LinksClosed() int64 {
	if s.guard == nil {
		return 0
	}
	return s.guard.Closed()
}
