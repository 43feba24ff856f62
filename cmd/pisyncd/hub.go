package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/cli"
	"github.com/pisyncd/pisyncd/internal/fsutil"
	"github.com/pisyncd/pisyncd/internal/redact"
)

const hubUsage = `pisyncd hub: a node of the hub cluster that workstations join as leaf nodes.

Usage:
  pisyncd hub                          run a hub node (SIGHUP reloads the registered nodes)
  pisyncd hub add-node NAME [--team T] [--out FILE] [--replace]
                                       register workstation NAME (its PISYNC_NODE_ID) and write its
                                       nkey seed to FILE (default NAME.nkey, 0600) for PISYNC_HUB_NKEY;
                                       a name registered already needs --replace, which gives it a
                                       new key (the old one is refused); it keeps its team unless
                                       --team names another (default team: pisyncd)
  pisyncd hub nodes [--json]           list the registered workstations
  pisyncd hub remove-node NAME [--erase] [--json]
                                       remove workstation NAME and reload the hub node running
                                       here, which closes its connections; --erase then erases
                                       every line it published from PI_HUB
  pisyncd hub reload                   have the hub node running here read its registered nodes
                                       again, as SIGHUP does
  pisyncd hub certs DIR --hosts H1,H2 [--force]
                                       create a development CA and hub certificate in DIR, and
                                       a route secret for a cluster (DIR/route.secret, kept if present);
                                       a CA there already is refused unless --force (a new CA: every
                                       workstation then needs its ca.pem)
  pisyncd hub certs DIR --renew [--hosts H1,H2]
                                       a new hub certificate (valid a year) from the CA in DIR
                                       (valid ten), which stays; hosts default to the old one's
  pisyncd hub dev-init DIR --hosts H1,H2 --nodes N1,N2 [--owner UID:GID] [--team-key FILE]
                                       both of the above for a development cluster, once:
                                       certificates and route.secret in DIR, nodes in DIR/nodes,
                                       seeds in DIR/NAME.nkey; what exists is kept (docker-compose.yml)
  pisyncd hub config                   print the nats-server configuration this node runs
                                       (a stock nats-server runs it too)
  pisyncd hub erase SESSION-ID [--team T] [--force] [--json]
                                       erase a session's lines from PI_HUB, up to the erase event
                                       a workstation published (pisyncd erase there first); asks the
                                       hub node running here, or any hub with --server URL and
                                       --user/--password or --creds of an administration user
  pisyncd hub erase --node NODE [--team T] [--json]
                                       erase every line NODE published (a node removed from the
                                       hub, one that filled its team's share: remove-node --erase)
  pisyncd hub usage [--team T] [--json]
                                       each team's share of the store, and what each node holds
                                       on PI_HUB, largest first (which node filled a share); asks
                                       the hub node running here, or any hub with --server as above
  pisyncd hub service [systemd|launchd] [--install]
                                       print (or install) a system service that runs this binary
                                       as a hub node, as a user of its own: a systemd unit
                                       (pisyncd-hub), or a launchd daemon on macOS (_pisyncd-hub)
  pisyncd hub upgrade                  copy a PI_HUB made by an older pisyncd into settings that
                                       allow erasing (once, on one node of a cluster; a single
                                       node does it when it starts)

Settings:
`

// hubCommand runs one hub node until a signal, or a hub subcommand.
func hubCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "help", "--help", "-h":
			fmt.Fprint(stdout, hubUsage)
			return config.HubUsage(stdout)
		case "add-node":
			return addNodeCommand(args[1:], stdout)
		case "remove-node":
			return removeNodeCommand(args[1:], stdout)
		case "nodes":
			return nodesCommand(args[1:], stdout)
		case "reload":
			return reloadCommand(args[1:], stdout)
		case "certs":
			return certsCommand(args[1:], stdout)
		case "dev-init":
			return devInitCommand(args[1:], stdout)
		case "erase":
			return hubEraseCommand(args[1:], stdout)
		case "upgrade":
			return hubUpgradeCommand(args[1:], stdout)
		case "usage":
			return hubUsageCommand(args[1:], stdout)
		case "service":
			return hubServiceCommand(args[1:], stdout)
		case "config":
			// No flags or operands: -h asks for this usage, anything
			// else is a mistake, not something to ignore.
			fs := flag.NewFlagSet("config", flag.ContinueOnError)
			if err := parseArgs(fs, args[1:], "pisyncd hub config (prints the nats-server configuration the hub runs with, from its PISYNC_HUB_* settings)", 0); err != nil {
				return err
			}
			cfg, err := config.LoadHub()
			if err != nil {
				return err
			}
			hc, err := hubConfig(cfg, nil)
			if err != nil {
				return err
			}
			nodes, err := embedded.LoadNodes(hc.NodesDir)
			if err != nil {
				return err
			}
			conf, err := embedded.RenderHubConfig(hc, nodes, nil)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(stdout, conf)
			return err
		default:
			return &usageError{Msg: fmt.Sprintf("unknown hub command %q (pisyncd hub help lists them)", args[0])}
		}
	}
	defer outliveLogReader()()
	cfg, err := config.LoadHub()
	if err != nil {
		return err
	}
	logger := cfg.Logging().Logger(stderr)
	logger.Info("pisyncd hub starting", readBuildInfo().LogAttrs()...)
	for _, w := range config.Unknown(os.Environ()) {
		logger.Warn(w)
	}
	ctx, stop := signalContext(stderr)
	defer stop()
	h, err := StartHub(ctx, cfg, logger.With("component", "nats"))
	if err != nil {
		return err
	}
	stopControl, err := hubControl(h, cfg, logger)
	if err != nil {
		return errors.Join(err, h.Close())
	}
	stopHTTP, err := serveHubHTTP(cfg, h, logger)
	if err != nil {
		stopControl()
		return errors.Join(err, h.Close())
	}
	nodes, _ := embedded.LoadNodes(cfg.NodesDir) // StartHub read them already
	for _, h := range hubStartHints(cfg, len(nodes)) {
		logger.Warn(h)
	}
	// Taken before the hub says it runs: a reload asked for as soon as it
	// does would otherwise end it (SIGHUP's default).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	logger.Info("hub running", "name", cfg.Name, "leaf", cfg.LeafListen, "client", cfg.Listen, "cluster", cfg.ClusterListen, "routes", redact.URLs(cfg.Routes), "route_auth", cfg.RouteSecret != "", "replicas", cfg.Replicas, "tls", cfg.TLSCert != "", "nodes_dir", cfg.NodesDir, "store_cipher", cmp.Or(cfg.StoreCipher, "off"))
	wctx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { (&shareWatch{srv: h, logger: logger, every: shareWatchEvery}).Run(wctx) })
	stopAll := func() {
		stopWatch()
		watching.Wait()
		stopHTTP()
		stopControl()
	}
	for {
		select {
		case <-ctx.Done():
			logger.Info("hub stopping", "cause", context.Cause(ctx))
			stopAll()
			if err := h.Close(); err != nil {
				return err
			}
			logger.Info("hub stopped")
			return nil
		case <-h.Failed():
			stopAll()
			return errors.Join(h.Err(), h.Close())
		case <-hup:
			reloadHub(ctx, h, cfg, logger) // it logs what failed
		}
	}
}

// reloadHub reads the registered nodes again (SIGHUP, or `hub
// remove-node` through the control socket): the connections of a node no
// longer registered are closed, and a new team gets its PI_HUB.
func reloadHub(ctx context.Context, h *embedded.Server, cfg *config.Hub, logger *slog.Logger) error {
	if err := hubFilesReadable(cfg); err != nil {
		logger.Error("reload failed; keeping the previous nodes and certificate", "err", err)
		return fmt.Errorf("reload failed, the hub keeps the nodes and certificate it had: %w", err)
	}
	if err := h.Reload(); err != nil {
		logger.Error("reload failed; keeping the previous nodes", "err", err)
		return fmt.Errorf("reload failed, the hub keeps the nodes it had: %w", err)
	}
	if err := ensureTeams(ctx, h, cfg, logger); err != nil {
		logger.Error("PI_HUB for a new team", "err", err)
		return fmt.Errorf("reloaded, but PI_HUB for a new team: %w", err)
	}
	logger.Info("reloaded registered nodes", "teams", h.Teams())
	return nil
}

// hubStartHints are the set-up mistakes a hub starts with although no
// workstation can use it as it is, or will not for long: each says the
// cause and the fix.
func hubStartHints(cfg *config.Hub, nodes int) []string {
	hints := hubTLSHints(cfg, time.Now())
	if cfg.Open {
		// The leaf listener's default is every address, for workstations
		// on other machines: open, that is anyone on the network.
		if config.CheckLoopback(cfg.LeafListen) != nil {
			return append(hints, fmt.Sprintf("hub accepts unauthenticated connections (PISYNC_HUB_OPEN) on PISYNC_HUB_LEAF_LISTEN %s, not only on this machine: whoever reaches it reads every session and writes into every workstation's. For a hub of this machine's own, set PISYNC_HUB_LEAF_LISTEN=127.0.0.1:7422; otherwise secure it (docs/HUB.md, \"Securing the hub\")", cfg.LeafListen))
		}
		return append(hints, "hub accepts unauthenticated connections (PISYNC_HUB_OPEN)")
	}
	if nodes == 0 {
		hints = append(hints, fmt.Sprintf("no workstation is registered in %s: the hub refuses every connection until one is. Register each with `pisyncd hub add-node NAME` (NAME is its PISYNC_NODE_ID), then send SIGHUP to this hub", cfg.NodesDir))
	}
	if cfg.TLSCert == "" {
		hints = append(hints, "the hub runs without TLS: the workstations' lines would cross the network in plain text, and a workstation refuses to send its key to a hub on another machine over plain nats:// (unless PISYNC_HUB_INSECURE=true). Set PISYNC_HUB_TLS_CERT and PISYNC_HUB_TLS_KEY (`pisyncd hub certs DIR --hosts HOST` makes a development pair)")
	}
	return hints
}

// certWarnBefore is how long before its end a hub's certificate is said
// to expire, at each start.
const certWarnBefore = 30 * 24 * time.Hour

// hubTLSHints say, at start, what of the hub's TLS files will stop the
// workstations or leak: a certificate expired, not valid yet or expiring
// within certWarnBefore (the workstations then refuse the hub and nothing
// is replicated), and a private key others may read (as a workstation's
// nkey seed is said to be). A file it cannot read is for the server to
// refuse.
func hubTLSHints(cfg *config.Hub, now time.Time) []string {
	var hints []string
	if cfg.TLSCert != "" {
		renew := renewHint(cfg)
		hints = append(hints, certTimeHint("the hub's certificate "+cfg.TLSCert+" (PISYNC_HUB_TLS_CERT)", cfg.TLSCert, now,
			"every workstation refuses the hub (x509: certificate has expired or is not yet valid) and nothing is replicated. Issue a new one from the same CA: "+renew,
			"every workstation refuses the hub then. Issue a new one from the same CA before: "+renew)...)
	}
	if cfg.TLSCA != "" {
		hints = append(hints, certTimeHint("the CA "+cfg.TLSCA+" (PISYNC_HUB_TLS_CA)", cfg.TLSCA, now,
			"no certificate it signed is trusted, the hub's own included. Make a new CA (`pisyncd hub certs DIR --hosts ... --force`) and give its ca.pem to every workstation (PISYNC_HUB_CA) and hub node",
			"no certificate it signed is trusted then, the hub's own included. Before then, make a new CA (`pisyncd hub certs DIR --hosts ... --force`) and give its ca.pem to every workstation (PISYNC_HUB_CA) and hub node")...)
	}
	readable := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().Perm()&0o077 != 0
	}
	if cfg.TLSKey != "" && readable(cfg.TLSKey) {
		hints = append(hints, fmt.Sprintf("the hub's TLS key file %s is readable by others; chmod 600 it (whoever reads it can pass for the hub)", cfg.TLSKey))
	}
	// The CA's key next to the CA or the certificate, where `hub certs`
	// writes it: the hub does not need it.
	var seen []string
	for _, f := range []string{cfg.TLSCA, cfg.TLSCert} {
		if f == "" {
			continue
		}
		p := filepath.Join(filepath.Dir(f), embedded.DevCerts.CAKey)
		if slices.Contains(seen, p) {
			continue
		}
		seen = append(seen, p)
		if readable(p) {
			hints = append(hints, fmt.Sprintf("the CA's key file %s is readable by others; chmod 600 it (whoever reads it can make certificates the workstations trust; the hub itself does not need it, only `hub certs --renew` does)", p))
		}
	}
	return hints
}

// renewHint says how to issue the hub a new certificate from its CA:
// `hub certs DIR --renew` needs the CA's files (ca.pem, ca-key.pem) in
// DIR, and writes hub.pem and hub-key.pem there. It named the folder of
// the hub's certificate whatever it held (a probe on 2026-12-06 followed
// it into "open DIR/ca.pem: no such file").
func renewHint(cfg *config.Hub) string {
	then := "then `pisyncd hub reload` (or SIGHUP) this hub"
	has := func(dir string) bool {
		_, err1 := os.Stat(filepath.Join(dir, embedded.DevCerts.CA))
		_, err2 := os.Stat(filepath.Join(dir, embedded.DevCerts.CAKey))
		return err1 == nil && err2 == nil
	}
	if dir := filepath.Dir(cfg.TLSCert); has(dir) {
		return fmt.Sprintf("`pisyncd hub certs %s --renew` (the same CA, so the workstations keep trusting the hub), %s", dir, then)
	}
	dir := "DIR"
	if cfg.TLSCA != "" && has(filepath.Dir(cfg.TLSCA)) {
		dir = filepath.Dir(cfg.TLSCA)
	}
	return fmt.Sprintf("`pisyncd hub certs %s --renew` in the folder of the CA that signed it (its %s and %s; the same CA, so the workstations keep trusting the hub), copy the %s and %s it writes there to %s and %s, %s",
		dir, embedded.DevCerts.CA, embedded.DevCerts.CAKey, embedded.DevCerts.Cert, embedded.DevCerts.Key, cfg.TLSCert, cfg.TLSKey, then)
}

// certTimeHint says that the certificate in path is not valid at now, or
// not for long, with what follows and the fix.
func certTimeHint(what, path string, now time.Time, invalid, expiring string) []string {
	c, err := embedded.ReadCert(path)
	if err != nil {
		return nil
	}
	day := func(t time.Time) string { return t.UTC().Format(time.DateTime) + " UTC" }
	switch {
	case now.After(c.NotAfter):
		return []string{fmt.Sprintf("%s expired on %s: %s", what, day(c.NotAfter), invalid)}
	case now.Before(c.NotBefore):
		return []string{fmt.Sprintf("%s is not valid before %s (or this machine's clock is wrong): %s", what, day(c.NotBefore), invalid)}
	case c.NotAfter.Sub(now) < certWarnBefore:
		return []string{fmt.Sprintf("%s expires on %s, in %d days: %s", what, day(c.NotAfter), int(c.NotAfter.Sub(now).Hours()/24), expiring)}
	}
	return nil
}

func hubConfig(cfg *config.Hub, logger *slog.Logger) (embedded.HubConfig, error) {
	hc := embedded.HubConfig{
		StateDir: cfg.StateDir, Name: cfg.Name, Listen: cfg.Listen, LeafListen: cfg.LeafListen,
		ClusterName: cfg.ClusterName, ClusterListen: cfg.ClusterListen, Routes: cfg.Routes,
		Replicas: cfg.Replicas, MaxStore: int64(cfg.MaxStore), MaxMemory: int64(cfg.MaxMemory),
		Team: embedded.TeamLimits{
			MaxStore: int64(cfg.TeamMaxStore), MaxMemory: int64(cfg.TeamMaxMemory),
			MaxStreams: cfg.TeamMaxStreams, MaxConsumers: cfg.TeamMaxConsumers, MaxLinks: cfg.TeamMaxLinks,
		},
		Logger: logger, Auth: !cfg.Open, NodesDir: cfg.NodesDir,
		StoreCipher: cfg.StoreCipher, StoreKeyFile: cfg.StoreKeyFile,
	}
	if cfg.TLSCert != "" {
		hc.TLS = &embedded.HubTLS{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, CAFile: cfg.TLSCA}
	}
	if cfg.RouteSecret != "" {
		secret, err := embedded.ReadRouteSecret(cfg.RouteSecret)
		if err != nil {
			return hc, fmt.Errorf("%s_ROUTE_SECRET: %w", config.HubPrefix, err)
		}
		hc.RouteSecret = secret
	}
	return hc, nil
}

// hubFilesReadable says which of the hub's TLS, route secret and node
// files is not a file, or one its process may not read (with whose it
// is), and the fix. The files are 0600, so made by root (or renewed or
// registered with sudo, before those kept the owner) for a hub that runs
// as a user of its own, they stop it at start or reload, where the error
// said only "permission denied".
func hubFilesReadable(cfg *config.Hub) error {
	files := []struct{ env, path string }{
		{"TLS_CERT", cfg.TLSCert}, {"TLS_KEY", cfg.TLSKey}, {"TLS_CA", cfg.TLSCA}, {"ROUTE_SECRET", cfg.RouteSecret},
		{"NODES_DIR", cfg.NodesDir},
	}
	if cfg.NodesDir != "" {
		nodes, _ := filepath.Glob(filepath.Join(cfg.NodesDir, "*.json"))
		for _, n := range nodes {
			files = append(files, struct{ env, path string }{"NODES_DIR", n})
		}
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		// Not blocking: a named pipe in a file's place made the open
		// wait for a writer for ever, the hub deaf to one SIGTERM.
		fh, err := os.OpenFile(f.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			st, serr := fh.Stat()
			fh.Close()
			if serr == nil && !st.Mode().IsRegular() && !(st.IsDir() && f.path == cfg.NodesDir) {
				return fmt.Errorf("%s_%s %s is not a file (%s): the hub's server reads it at start and at each reload; give a file there", config.HubPrefix, f.env, f.path, cli.NotRegular(st.Mode()))
			}
			continue
		}
		if errors.Is(err, fs.ErrNotExist) && f.env != "NODES_DIR" {
			// Before, nats-server's parse error of the generated
			// hub.conf said it, with line numbers of that file.
			fix := "make the hub's certificates with `pisyncd hub certs DIR` (docs/HUB.md), or unset the TLS settings for a hub on loopback alone"
			if f.env == "ROUTE_SECRET" {
				fix = "`pisyncd hub certs DIR` writes route.secret there; copy the same file to every hub node of the cluster (docs/HUB.md)"
			}
			return fmt.Errorf("%s_%s %s: no such file: %s", config.HubPrefix, f.env, f.path, fix)
		}
		if !errors.Is(err, fs.ErrPermission) {
			continue // unreadable otherwise: the server's own error says it
		}
		whose, chown := "", "chown"
		if fi, serr := os.Stat(f.path); serr == nil {
			if uid, _, ok := fsutil.Owner(fi); ok {
				whose = fmt.Sprintf(", which belongs to %s with mode %04o", userName(uid), fi.Mode().Perm())
			}
			if fi.IsDir() {
				chown = "chown -R"
			}
		}
		me := userName(os.Geteuid())
		return fmt.Errorf("the hub runs as %s and cannot read %s (%s_%s)%s: give it to the hub's user (%s %s %s), or make it as that user (sudo -u %s pisyncd hub certs DIR ..., or add-node); a renewal (--renew) and a node registered into a folder of the hub's keep its owner",
			me, f.path, config.HubPrefix, f.env, whose, chown, me, f.path, me)
	}
	return hubKeyPair(cfg)
}

// hubKeyPair checks that the hub's certificate and key files are a pair.
// Two files swapped, or the CA's given for the hub's, stopped the hub
// with nats-server's parse error of the generated hub.conf, which named
// neither setting (found by a probe on 2026-12-06).
func hubKeyPair(cfg *config.Hub) error {
	if cfg.TLSCert == "" || cfg.TLSKey == "" {
		return nil
	}
	if _, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey); err != nil {
		return fmt.Errorf("%s_TLS_CERT %s and %s_TLS_KEY %s are not the hub's certificate and its key: %v. Set them to hub.pem and hub-key.pem of the folder `pisyncd hub certs DIR` wrote (not ca.pem or ca-key.pem), or to your own certificate and key",
			config.HubPrefix, cfg.TLSCert, config.HubPrefix, cfg.TLSKey, err)
	}
	return nil
}

// userName is the name of user uid, or its number.
func userName(uid int) string {
	id := strconv.Itoa(uid)
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return "uid " + id
}

// StartHub starts a hub node and makes sure every team's account has
// PI_HUB (on a cluster, once it has a JetStream leader).
func StartHub(ctx context.Context, cfg *config.Hub, logger *slog.Logger) (*embedded.Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := hubFilesReadable(cfg); err != nil {
		return nil, err
	}
	hc, err := hubConfig(cfg, logger)
	if err != nil {
		return nil, err
	}
	srv, err := embedded.StartHub(ctx, hc)
	if err != nil {
		return nil, inUse(err, listener{config.HubPrefix + "_LISTEN", cfg.Listen},
			listener{config.HubPrefix + "_LEAF_LISTEN", cfg.LeafListen}, listener{config.HubPrefix + "_CLUSTER_LISTEN", cfg.ClusterListen})
	}
	if cfg.ClusterListen == "" {
		// A single node copies a PI_HUB of old into its new settings now
		// (as long as that takes); a cluster waits for `hub upgrade`.
		if _, err := upgradeTeams(ctx, srv, cfg, logger); err != nil {
			srv.Close()
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := ensureTeams(sctx, srv, cfg, logger); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

// teams lists the hub's team accounts, "" for the one global account of a
// hub without authorization.
func teams(srv *embedded.Server) []string {
	if t := srv.Teams(); len(t) > 0 {
		return t
	}
	return []string{""}
}

// teamConn opens pisyncd's in-process administration connection to a
// team's account.
func teamConn(srv *embedded.Server, team string) (*nats.Conn, error) {
	if team == "" {
		return srv.Connect(nats.Name("pisyncd-hub"))
	}
	return srv.ConnectTeam(team, nats.Name("pisyncd-hub"))
}

// withTeam runs do with an administration connection to a team's account,
// closed after.
func withTeam(srv *embedded.Server, team string, do func(*nats.Conn) error) error {
	nc, err := teamConn(srv, team)
	if err != nil {
		return err
	}
	defer nc.Close()
	return do(nc)
}

// namedTeams is the hub's teams, or only the one named if not "" (none
// when the hub has no such team).
func namedTeams(srv *embedded.Server, only string) []string {
	all := teams(srv)
	if only == "" {
		return all
	}
	return slices.DeleteFunc(all, func(t string) bool { return t != only })
}

// noTeam is the answer to a --team the hub has no account for: the teams
// it has, to choose from.
func noTeam(srv *embedded.Server, cmd, team string) string {
	return fmt.Sprintf("%s: no team %q on this hub; its teams: %s (pisyncd hub nodes lists each node's)", cmd, team, strings.Join(teams(srv), ", "))
}

func ensureTeams(ctx context.Context, srv *embedded.Server, cfg *config.Hub, logger *slog.Logger) error {
	for _, team := range teams(srv) {
		err := withTeam(srv, team, func(nc *nats.Conn) error { return ensureHubStream(ctx, nc, cfg.Replicas, logger.With("team", team)) })
		if err != nil {
			return fmt.Errorf("team %q: %w", team, err)
		}
	}
	return nil
}

func ensureHubStream(ctx context.Context, nc *nats.Conn, replicas int, logger *slog.Logger) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		want := eventlog.HubStreamConfig(replicas)
		s, err := js.Stream(cctx, eventlog.HubStream)
		if err == nil && s.CachedInfo().Config.AllowDirect && !want.AllowDirect {
			// Said once, as it changes: workstations of an older release
			// that encrypt ask by direct get and stop until upgraded.
			logger.Info("PI_HUB and PI_KEYS no longer answer direct gets (this release): workstations of an older release that encrypt stop forwarding and copying until they are upgraded (docs/HUB.md, \"Upgrading\")")
		}
		if err == nil && eventlog.NeedsUpgrade(s.CachedInfo().Config, want) {
			// Made by an older pisyncd and not upgraded yet (a cluster):
			// everything else is brought up to date, and `hub erase`
			// waits for `pisyncd hub upgrade`.
			have := s.CachedInfo().Config
			want.DenyDelete, want.DenyPurge = have.DenyDelete, have.DenyPurge
			logger.Warn("PI_HUB denies deleting messages (made by an older pisyncd): run `pisyncd hub upgrade` on one hub node before `pisyncd hub erase`")
		}
		_, err = eventlog.EnsureStream(cctx, js, want)
		if err == nil {
			_, err = eventlog.EnsureStream(cctx, js, eventlog.KeysStreamConfig(replicas))
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hub: PI_HUB, PI_KEYS: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// upgradeTeams copies every team's PI_HUB of old into its new settings
// (eventlog.UpgradeStream), keeping the snapshots in the state dir.
func upgradeTeams(ctx context.Context, srv *embedded.Server, cfg *config.Hub, logger *slog.Logger) (upgraded []string, err error) {
	for _, team := range teams(srv) {
		start := time.Now()
		var done bool
		err := withTeam(srv, team, func(nc *nats.Conn) (err error) {
			done, err = eventlog.UpgradeStream(ctx, nc, eventlog.HubStreamConfig(cfg.Replicas), upgradeDir(cfg, team))
			return err
		})
		if err != nil {
			return upgraded, fmt.Errorf("team %q: %w", team, err)
		}
		if done {
			logger.Info("PI_HUB upgraded to allow erasing sessions", "team", team, "took", time.Since(start).Round(time.Millisecond))
			upgraded = append(upgraded, team)
		}
	}
	return upgraded, nil
}

// upgradeDir holds a team's PI_HUB snapshot while it is upgraded.
func upgradeDir(cfg *config.Hub, team string) string {
	if team == "" {
		team = "global"
	}
	return filepath.Join(cfg.StateDir, "upgrade", team)
}

// workstationSettings is what add-node tells its operator to give the
// workstation: every setting it needs to join this hub, not only its id and
// seed (with those alone, a newcomer met the missing URL and CA one
// refusal at a time).
//
// fromHub says the TLS settings are the running hub's (its reload's
// answer), not only this shell's.
func workstationSettings(cfg *config.Hub, name string, fromHub bool) string {
	port := "7422"
	if _, p, err := net.SplitHostPort(cfg.LeafListen); err == nil {
		port = p
	}
	set := fmt.Sprintf("  PISYNC_NODE_ID=%s PISYNC_HUB_NKEY=<path of the seed>", name)
	if cfg.TLSCert == "" {
		if fromHub {
			return fmt.Sprintf("copy it to the workstation and set\n%s PISYNC_HUB_URLS=nats://<this host>:%s\n  (no TLS: the hub node running here runs without PISYNC_HUB_TLS_CERT)\n", set, port)
		}
		// Said, since with no hub running add-node reads the settings of
		// its own shell: one without the hub's TLS settings would send a
		// workstation to nats:// for a hub that runs with TLS.
		return fmt.Sprintf("copy it to the workstation and set\n%s PISYNC_HUB_URLS=nats://<this host>:%s\n  (no TLS: PISYNC_HUB_TLS_CERT is unset here, and no hub node runs here to ask)\n", set, port)
	}
	ca, _ := filepath.Abs(filepath.Join(filepath.Dir(cfg.TLSCert), "ca.pem"))
	if _, err := os.Stat(ca); err == nil {
		return fmt.Sprintf("copy it and %s to the workstation and set\n%s PISYNC_HUB_CA=<path of ca.pem>\n  PISYNC_HUB_URLS=tls://<this host, as its certificate names it>:%s\n", ca, set, port)
	}
	return fmt.Sprintf("copy it to the workstation and set\n%s PISYNC_HUB_CA=<the CA that signed %s, unless the system trusts it>\n  PISYNC_HUB_URLS=tls://<this host, as its certificate names it>:%s\n", set, cfg.TLSCert, port)
}

func addNodeCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("add-node", flag.ContinueOnError)
	team := fs.String("team", "", "the node's team (NATS account; default "+embedded.DefaultTeam+", or with --replace the team it is in)")
	out := fs.String("out", "", "where to write the node's nkey seed (default NAME.nkey)")
	replace := fs.Bool("replace", false, "give a node registered already a new key (its old one is refused from the hub's next reload); it stays in its team unless --team names another")
	if err := parseArgs(fs, reorder(args, "team", "out"), "pisyncd hub add-node NAME [--team T] [--out FILE] [--replace]", 1); err != nil {
		return err
	}
	name := fs.Arg(0)
	// Before the seed file is made: "a/b" was said to be a file that
	// could not be made, or made a seed file named after it.
	if err := embedded.CheckNodeName(name); err != nil {
		return fmt.Errorf("hub add-node: %w", err)
	}
	cfg, err := config.LoadHub()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = name + ".nkey"
	}
	// The seed file first, created new: a refusal (the file exists, a
	// link was planted there) leaves the registrations as they were.
	f, err := embedded.CreateSecretFile(*out)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	var seed []byte
	var old *embedded.Node
	if *replace {
		seed, old, err = embedded.ReplaceNode(cfg.NodesDir, name, *team)
	} else {
		seed, err = embedded.AddNode(cfg.NodesDir, name, *team)
	}
	if err != nil {
		f.Close()
		os.Remove(*out)
		if exists := (*embedded.NodeExistsError)(nil); errors.As(err, &exists) {
			return fmt.Errorf("%w: registering it again would replace the key the workstation runs with, and cut it off. Nothing changed. To give it a new key on purpose (its seed leaked, the machine was replaced), add --replace; `pisyncd hub nodes` lists the registered names", err)
		}
		return err
	}
	if err := embedded.WriteSeed(f, seed); err != nil {
		return err
	}
	if *team == "" {
		*team = embedded.DefaultTeam
		if old != nil {
			*team = old.Team
		}
	}
	abs, _ := filepath.Abs(*out)
	// The hub node running here admits it at once (a key replaced: the
	// old seed's link is closed); others need a reload of their own. Its
	// answer names the TLS and leaf settings it runs with: the workstation
	// is told those, whatever this shell has set.
	ctx, stop := signalContext(io.Discard)
	defer stop()
	running, err := reloadHere(ctx, cfg)
	reloaded := running != nil
	hub := *cfg
	if reloaded {
		hub.TLSCert, hub.LeafListen = running.TLSCert, cmp.Or(running.LeafListen, cfg.LeafListen)
	}
	if old != nil {
		fmt.Fprintf(stdout, "replaced node %s's key in %s: its old key %s is refused from the hub's next reload, and a workstation still running with the old seed is cut off until it has the new one\n", name, cfg.NodesDir, old.Nkey)
		if old.Team != *team {
			fmt.Fprintf(stdout, "moved node %s from team %s to team %s: its lines already on the hub stay in team %s's PI_HUB\n", name, old.Team, *team, old.Team)
		}
		fmt.Fprintf(stdout, "its new seed is in %s: %s", abs, workstationSettings(&hub, name, reloaded))
	} else {
		fmt.Fprintf(stdout, "registered node %s (team %s) in %s\nits seed is in %s: %s", name, *team, cfg.NodesDir, abs, workstationSettings(&hub, name, reloaded))
	}
	switch {
	case err != nil:
		return fmt.Errorf("node %s registered, but the hub node running here did not reload, so it does not admit the node yet: %w; mend that and run pisyncd hub reload", name, err)
	case !reloaded:
		if hint := serviceStateDirHint(cfg); hint != "" {
			fmt.Fprintf(stdout, "no hub node runs on this state dir, and %s\n", hint)
		}
		fmt.Fprintln(stdout, "then reload the running hub nodes: pisyncd hub reload on each (or SIGHUP), or restart them; a stock nats-server reads only its file: pisyncd hub config again, then nats-server --signal reload (=PID with more than one here)")
	default:
		fmt.Fprintf(stdout, "the hub node running here reloaded and admits %s\n", name)
		if cfg.ClusterListen != "" || len(cfg.Routes) > 0 {
			fmt.Fprintf(stdout, "the cluster's other hub nodes admit it once %s is in their PISYNC_HUB_NODES_DIR (one folder they share, or a copy in each) and they reload: pisyncd hub reload on each\n", name+".json")
		}
	}
	return nil
}

const certsUsage = "pisyncd hub certs DIR --hosts H1,H2 [--force] | pisyncd hub certs DIR --renew [--hosts H1,H2]"

func certsCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	hosts := fs.String("hosts", "", "comma-separated host names and IPs of the hub nodes (with --renew: default, those of the hub certificate it replaces)")
	renew := fs.Bool("renew", false, "issue a new hub certificate (hub.pem, hub-key.pem) from the CA in DIR (ca.pem, ca-key.pem), which stays: the workstations keep trusting the hub")
	force := fs.Bool("force", false, "replace the CA in DIR too: every workstation refuses the hub until it has the new ca.pem")
	if err := parseArgs(fs, reorder(args, "hosts"), certsUsage, 1); err != nil {
		return err
	}
	dir, hs := fs.Arg(0), splitList(*hosts)
	if err := checkHosts(hs); err != nil {
		return err
	}
	switch {
	case *renew && *force:
		return &usageError{Msg: "certs: --renew keeps the CA, --force replaces it: one or the other", Usage: certsUsage}
	case *renew:
		cert, err := embedded.RenewHubCert(dir, hs)
		if err != nil {
			return fmt.Errorf("certs: %w (--renew needs the CA that `pisyncd hub certs` made in DIR: %s and %s)", err, embedded.DevCerts.CA, embedded.DevCerts.CAKey)
		}
		names := append(slices.Clone(cert.DNSNames), ipStrings(cert)...)
		fmt.Fprintf(stdout, "new hub certificate for %v from the CA in %s written to %s (hub.pem, hub-key.pem), valid until %s\n", names, dir, dir, cert.NotAfter.UTC().Format(time.DateOnly))
		fmt.Fprintf(stdout, "the CA (ca.pem) is unchanged: the workstations keep trusting the hub. Each hub node serves it once it is reloaded (pisyncd hub reload, SIGHUP or systemctl reload pisyncd-hub; its connections stay) or restarted: copy hub.pem and hub-key.pem to the other nodes of a cluster first\n")
		if ca, err := embedded.ReadCert(filepath.Join(dir, embedded.DevCerts.CA)); err == nil && !cert.NotAfter.Before(ca.NotAfter) {
			fmt.Fprintf(stdout, "the CA itself expires on %s, and no certificate it signed is trusted after: before then, make a new CA (pisyncd hub certs DIR --hosts ... --force) and give its ca.pem to every workstation (PISYNC_HUB_CA) and hub node\n", ca.NotAfter.UTC().Format(time.DateOnly))
		}
		return nil
	case *hosts == "":
		return &usageError{Msg: "certs: --hosts is required", Usage: certsUsage}
	case *force:
		if err := embedded.ReplaceDevCerts(dir, hs); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "new development CA and hub certificate for %v written to %s (ca.pem, hub.pem, hub-key.pem, and the CA's key ca-key.pem, which stays on this machine), replacing what was there: copy the new ca.pem to every workstation (PISYNC_HUB_CA) and restart it, and these files to every hub node\n", hs, dir)
	default:
		if err := embedded.GenerateDevCerts(dir, hs); err != nil {
			var exists *embedded.CAExistsError
			if errors.As(err, &exists) {
				return fmt.Errorf("certs: %w, which the workstations trust (their PISYNC_HUB_CA): a new CA would make every one of them refuse the hub once it restarts, so nothing was written. A new hub certificate from this CA (one expiring, other host names): pisyncd hub certs %s --renew [--hosts H1,H2]. A new CA on purpose: add --force, then give its ca.pem to every workstation", err, dir)
			}
			return err
		}
		fmt.Fprintf(stdout, "development CA and hub certificate for %v written to %s (ca.pem, hub.pem, hub-key.pem, and the CA's key ca-key.pem, which stays on this machine: it signs renewals, --renew)\n", hs, dir)
	}
	secret := filepath.Join(dir, embedded.RouteSecretFile)
	made, err := embedded.GenerateRouteSecret(secret)
	if err != nil {
		return err
	}
	if made {
		fmt.Fprintf(stdout, "route secret for a cluster written to %s (PISYNC_HUB_ROUTE_SECRET; the same file on every hub node)\n", secret)
	}
	if hint := rootOwnedCertsHint(dir); hint != "" {
		fmt.Fprintln(stdout, hint)
	}
	return nil
}

// rootOwnedCertsHint says, after `hub certs` run as root, that the files
// it made are root's, 0600, so a hub running as a user of its own (the
// service's) cannot read them, and which to give it: not the CA's key,
// which the hub does not need. "" when they are another user's already
// (made in a folder of theirs, or kept by a renewal).
func rootOwnedCertsHint(dir string) string {
	if os.Geteuid() != 0 {
		return ""
	}
	fi, err := os.Stat(filepath.Join(dir, embedded.DevCerts.Key))
	if err != nil {
		return ""
	}
	if uid, _, ok := fsutil.Owner(fi); !ok || uid != 0 {
		return ""
	}
	var files []string
	for _, n := range []string{embedded.DevCerts.Cert, embedded.DevCerts.Key, embedded.DevCerts.CA, embedded.RouteSecretFile} {
		files = append(files, filepath.Join(dir, n))
	}
	return fmt.Sprintf("these files are root's, 0600: a hub running as a user of its own (the service's, pisyncd-hub) cannot read them. Give it those it reads: chown pisyncd-hub %s (not %s, which only a renewal needs)", strings.Join(files, " "), filepath.Join(dir, embedded.DevCerts.CAKey))
}

func ipStrings(c *x509.Certificate) []string {
	var out []string
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}
