package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

const (
	// readyTimeout bounds start-up. An empty store starts in a few ms and
	// ~180 MB in 0.3 s (nats-design.md §8.2); 10 s leaves room for a slow
	// disk without hanging the daemon forever.
	readyTimeout = 10 * time.Second

	// shutdownTimeout bounds Close. Shutdown flushes and closes every
	// stream's files; it takes milliseconds unless the disk is stuck.
	shutdownTimeout = 30 * time.Second

	maxPayload = 1 << 20 // nats-design.md §3: lines over 256 KiB are chunked

	// reconnectWait is the pause between an in-process client's attempts
	// to reach the server again while a restart replaces it (StoreWatch).
	// The attempts cost nothing but a failed call, and the store is down
	// while they wait.
	reconnectWait = 50 * time.Millisecond
)

// Server is a running embedded nats-server that owns its state dir.
type Server struct {
	// ns is the running server.Server. A workstation's is replaced by a
	// new one when the store is recovered after a write error
	// (StoreWatch), so it is read through nats() by whoever may run
	// meanwhile.
	ns     atomic.Pointer[server.Server]
	logger *natsLogger
	trace  bool
	lock   *dirLock

	inProcessKey nkeys.KeyPair // ephemeral per Start, only ever in memory
	// storeCipher and storeKey encrypt the store at rest ("": in clear).
	storeCipher, storeKey string
	clientURL             string
	credsPath             string

	// Hub nodes only: their configuration, the in-process admin key of
	// each team's account, and the registered nodes.
	hub    *HubConfig
	admins map[string]nkeys.KeyPair
	nodes  []Node
	// sysKey is the hub's in-process key to its system account
	// (LinkGuard), made once at start; guard runs until Close.
	sysKey    nkeys.KeyPair
	guard     *LinkGuard
	stopGuard func()
	guarding  sync.WaitGroup
	// reloadMu keeps reloads apart (SIGHUP and the control socket's);
	// adminsMu guards admins and nodes, which a reload writes while the
	// share watch and control requests read them.
	reloadMu sync.Mutex
	adminsMu sync.RWMutex

	// opts is what every server.Server of a workstation is made from (a
	// copy each time: a server keeps and changes its options), with the
	// listener's port as first bound, so that a restart after a write
	// error (StoreWatch) opens the same store and listens where the
	// credentials file says. restartMu keeps such a restart and Close
	// apart.
	opts      *server.Options
	restartMu sync.Mutex
	// restarting keeps in-process clients off a server being shut down
	// for a restart: the server closes its clients first, and one that
	// got in again afterwards would send requests that JetStream, shut
	// down next, never answers (each costing its caller a timeout).
	// connMu orders it with the clients' connects.
	connMu     sync.RWMutex
	restarting bool
	// storeHint gets a value when the server logs an error that may be a
	// store write failure, so StoreWatch checks at once. One channel for
	// every server.Server a restart makes.
	storeHint chan struct{}
	// sent counts the writes in-process clients made to the server
	// (sentConn): StoreWatch checks the store's health after a tick with
	// some, and seldom in a quiet stretch with none, when no write of
	// ours can have failed.
	sent atomic.Uint64

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Start locks cfg.StateDir and starts the server in it, returning once the
// server accepts connections and JetStream is enabled. ctx bounds only the
// start-up; the server runs until Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	if err := PrivateStateDir(cfg.StateDir, cfg.Logger); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	lock, err := lockDir(cfg.StateDir, cfg.Holder)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	s, err := start(ctx, cfg, lock)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	return s, nil
}

// start does everything that happens under the lock. On failure it stops
// the server, if one was started, and releases the lock.
func start(ctx context.Context, cfg Config, lock *dirLock) (s *Server, err error) {
	defer func() {
		if err == nil {
			return
		}
		if s != nil && s.nats() != nil {
			if serr := shutdown(s.nats()); serr != nil {
				// Keep the lock: the server may still touch the store.
				err = fmt.Errorf("%w (and %v; state dir stays locked)", err, serr)
				return
			}
		}
		if rerr := lock.release(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	// The server would create it too, but with our mode only by luck.
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, server.JetStreamStoreDir), 0o700); err != nil {
		return nil, fmt.Errorf("store dir: %w", err)
	}
	if err := setAsideUnfinished(cfg.StateDir, cfg.Logger); err != nil {
		return nil, err
	}
	storeKey, commitKey, err := storeKey(cfg.StateDir, cfg.StoreCipher, cfg.StoreKeyFile, "PISYNC_STORE_CIPHER")
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("in-process key: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("in-process key: %w", err)
	}
	s = newServer(cfg.Logger, cfg.Trace, lock)
	s.inProcessKey = kp
	s.storeCipher, s.storeKey = cfg.StoreCipher, storeKey
	opts := &server.Options{
		ServerName:         serverName(cfg),
		NoSigs:             true, // else SIGINT/SIGTERM call os.Exit inside the library
		NoLog:              false,
		DontListen:         true,
		JetStream:          true,
		StoreDir:           cfg.StateDir, // the server appends "jetstream"
		JetStreamDomain:    Domain(cfg.NodeID),
		JetStreamMaxMemory: cfg.MaxMemory,
		JetStreamMaxStore:  cfg.MaxStore,
		SyncAlways:         true,
		SyncInterval:       2 * time.Minute, // what `sync: always` in a config file sets
		MaxPayload:         maxPayload,
		// The in-process user exists even without a listener so that
		// authentication is the same in every set-up. It is an nkey made
		// for this run and held only in memory, and it is limited to
		// in-process connections: nothing on disk or on the wire could
		// be replayed over TCP.
		Nkeys: []*server.NkeyUser{{
			Nkey:                   pub,
			AllowedConnectionTypes: connTypes(jwt.ConnectionTypeInProcess),
		}},
	}
	applyStoreCipher(opts, s.storeCipher, s.storeKey)
	if err := applyLeaf(opts, cfg); err != nil {
		return nil, err
	}
	for _, u := range plainCredentialURLs(cfg) {
		// Only reachable with HubInsecure: withDefaults refuses otherwise.
		cfg.Logger.Warn("INSECURE: this node's hub credentials cross a plain-text connection; anyone on the network path can read and replay them (HubInsecure / PISYNC_HUB_INSECURE)", "url", u)
	}
	var creds listenerCreds
	if cfg.Listen != "" {
		host, port, err := loopbackAddr(cfg.Listen)
		if err != nil {
			return nil, err
		}
		s.credsPath = filepath.Join(cfg.StateDir, credsFileName)
		creds, err = loadOrCreateCreds(cfg.StateDir, cfg.Logger)
		if err != nil {
			return nil, err
		}
		daemon, read, err := listenerAccounts()
		if err != nil {
			return nil, err
		}
		opts.Accounts = []*server.Account{daemon, read}
		opts.DontListen = false
		opts.Host, opts.Port = host, port
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{
			Nkey:                   creds.public,
			Account:                read,
			AllowedConnectionTypes: connTypes(jwt.ConnectionTypeStandard),
			Permissions:            listenerPermissions(),
		})
	}

	s.opts = opts
	if err := s.launchFirst(ctx, freshOptions(opts)); err != nil {
		return s, err
	}
	if storeKey != "" {
		err := checkStoreOpened(s.nats(), cfg.StateDir)
		if err != nil {
			// nats-server's recovery of an encrypted stream after a
			// kill -9 once failed ("corrupt state file") where the next
			// start, on the very same files, opened it
			// (TestSIGKILLExactlyOnceStoreCipher, about one run in
			// twenty): one more start before refusing.
			cfg.Logger.Warn("not every encrypted stream opened; starting the store once more", "err", err)
			if rerr := s.restartServer(); rerr != nil {
				return s, fmt.Errorf("%w (and starting it again: %v)", err, rerr)
			}
			err = checkStoreOpened(s.nats(), cfg.StateDir)
		}
		if err != nil {
			return s, err
		}
	}
	if commitKey != nil {
		if err := commitKey(); err != nil {
			return s, err
		}
	}
	if s.credsPath != "" {
		addr := s.nats().Addr()
		// A restart listens on the very port: local tools know it from
		// the credentials file.
		if ta, ok := addr.(*net.TCPAddr); ok {
			s.opts.Port = ta.Port
		}
		s.clientURL = "nats://" + addr.String()
		creds.ctx.URL = s.clientURL
		if err := saveCreds(s.credsPath, creds.ctx); err != nil {
			return s, err
		}
	}
	return s, nil
}

func newServer(logger *slog.Logger, trace bool, lock *dirLock) *Server {
	return &Server{
		logger:    newNATSLogger(logger),
		trace:     trace,
		lock:      lock,
		storeHint: make(chan struct{}, 1),
	}
}

// launchFirst creates and starts the Server's first server.Server from
// opts and waits until it is ready. A fatal error while it starts is the
// Server's (Err).
func (s *Server) launchFirst(ctx context.Context, opts *server.Options) error {
	ns, err := s.launch(ctx, opts, s.logger)
	if ns != nil {
		s.ns.Store(ns)
	}
	return err
}

// launch creates and starts a server.Server and waits until it is ready.
// Until then its fatal errors go to start, and after that to the Server's
// log. It returns the server.Server whenever one was created: on an error
// the caller shuts it down.
func (s *Server) launch(ctx context.Context, opts *server.Options, start *natsLogger) (*server.Server, error) {
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	log := &serverLog{natsLogger: s.logger, start: start, hint: s.storeHint}
	debug := s.logger.log.Enabled(ctx, slog.LevelDebug)
	ns.SetLoggerV2(log, debug, s.trace, false)
	ns.Start()
	if err := waitReady(ctx, ns, start.fatal); err != nil {
		return ns, err
	}
	log.started.Store(true)
	// A fatal error logged between the last look and the switch.
	if err := start.fatal(); err != nil {
		return ns, err
	}
	return ns, nil
}

// waitReady polls in short steps rather than one ReadyForConnections call
// so that a fatal error or a cancelled ctx ends the wait at once: after
// some Fatalf paths the server never completes start-up.
func waitReady(ctx context.Context, ns *server.Server, fatal func() error) error {
	deadline := time.Now().Add(readyTimeout)
	for !ns.ReadyForConnections(100 * time.Millisecond) {
		if err := fatal(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("start: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start: server not ready for connections after %s", readyTimeout)
		}
	}
	if err := fatal(); err != nil {
		return err
	}
	if !ns.JetStreamEnabled() {
		return errors.New("start: JetStream is not enabled (see the server log)")
	}
	return nil
}

func connTypes(types ...string) map[string]struct{} {
	m := make(map[string]struct{}, len(types))
	for _, t := range types {
		m[t] = struct{}{}
	}
	return m
}

// Connect opens an in-process client connection (a net.Pipe, no TCP).
// opts may tune the connection; the transport and the credentials are
// always the server's own and override any in opts.
//
// The connection reconnects without end, every reconnectWait, unless
// opts say otherwise: a restart after a write error (StoreWatch) replaces
// the server.Server, and the connection follows it to the new one
// (inProcess). Its subscriptions are made again there.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	if s.closed.Load() {
		return nil, errors.New("embedded: connect: server is closed")
	}
	opts = append(append(reconnectOptions(), nats.ErrorHandler(s.asyncError)), opts...)
	opts = append(opts, nats.InProcessServer(inProcess{s}))
	if s.inProcessKey != nil {
		pub, err := s.inProcessKey.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("embedded: connect: %w", err)
		}
		opts = append(opts, nats.Nkey(pub, s.inProcessKey.Sign))
	}
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: connect: %w", err)
	}
	return nc, nil
}

// reconnectOptions are an in-process client's defaults: try again
// forever, at short intervals, buffering what is published meanwhile
// (nats.go's default buffer).
// asyncError logs what nats.go reports outside any call (a subscription
// that fell behind and lost messages, a permission refused to a
// subscribe): without a handler nats.go prints it to stderr, outside the
// daemon's log.
func (s *Server) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	attrs := []any{"err", err}
	if sub != nil {
		msgs, bytes, _ := sub.Pending()
		attrs = append(attrs, "subject", sub.Subject, "pending_msgs", msgs, "pending_bytes", bytes)
	}
	s.logger.log.Warn("nats client", attrs...)
}

func reconnectOptions() []nats.Option {
	return []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		// Jitter spreads many clients' reconnects to a remote server;
		// here it would only lengthen the outage.
		nats.ReconnectJitter(0, 0),
	}
}

// inProcess gives nats.go a connection to the Server's current
// server.Server. nats.go asks it at every (re)connect, so a client
// reaches the new server after a restart without being made again; until
// the new one is ready, it is refused and tries again.
type inProcess struct{ s *Server }

var _ nats.InProcessConnProvider = inProcess{}

func (p inProcess) InProcessConn() (net.Conn, error) {
	p.s.connMu.RLock()
	defer p.s.connMu.RUnlock()
	if p.s.restarting {
		return nil, errors.New("embedded: the server is restarting")
	}
	c, err := p.s.nats().InProcessConn()
	if err != nil {
		return nil, err
	}
	return sentConn{c, &p.s.sent}, nil
}

// sentConn counts what a client writes to the server: one atomic add for a
// flush of its buffer, which may hold many messages.
type sentConn struct {
	net.Conn
	sent *atomic.Uint64
}

func (c sentConn) Write(b []byte) (int, error) {
	c.sent.Add(1)
	return c.Conn.Write(b)
}

// setRestarting turns away in-process connects (inProcess) while on.
func (s *Server) setRestarting(on bool) {
	s.connMu.Lock()
	s.restarting = on
	s.connMu.Unlock()
}

// nats is the current server.Server.
func (s *Server) nats() *server.Server { return s.ns.Load() }

// StoreCipher is the cipher the store is encrypted with at rest,
// StoreCipherOff when it is in clear.
func (s *Server) StoreCipher() string { return cmp.Or(s.storeCipher, StoreCipherOff) }

// ClientURL is the loopback listener's URL, or "" without a listener.
func (s *Server) ClientURL() string { return s.clientURL }

// CredentialsFile is the path of the listener credentials (a nats CLI
// context file), or "" without a listener.
func (s *Server) CredentialsFile() string { return s.credsPath }

// NATS exposes the underlying server for advanced use and tests. After a
// restart (StoreWatch) it is a different one: callers should not keep it.
func (s *Server) NATS() *server.Server { return s.nats() }

// storeUse returns what the JetStream file store holds and its limit, as
// the server counts them when it refuses a write (0, 0 while it is down).
func (s *Server) storeUse() (used, limit int64) {
	ns := s.nats()
	if ns == nil {
		return 0, 0
	}
	jsi, err := ns.Jsz(nil)
	if err != nil || jsi.Disabled {
		return 0, 0
	}
	return int64(jsi.Store), jsi.Config.MaxStore
}

// HubLinked reports whether the server's leaf connection to the hub is up
// (false without a hub). The forwarder and the downloader each say whether
// their last request reached the hub; an idle forwarder asks nothing, so
// this is what tells that the hub went away before a line has to go.
func (s *Server) HubLinked() bool {
	ns := s.nats()
	return ns != nil && ns.NumLeafNodes() > 0
}

// HubPeer names the hub node the leaf link is made to, as "NAME at
// HOST:PORT" ("" while down): with several hub URLs, or a cluster whose
// nodes advertise each other, the one linked to may be none the settings
// name.
func (s *Server) HubPeer() string {
	_, leafs := s.hubLeafs()
	if len(leafs) == 0 {
		return ""
	}
	l := leafs[0]
	return fmt.Sprintf("%s at %s", l.Name, net.JoinHostPort(l.IP, strconv.Itoa(l.Port)))
}

// HubLink names the server's leaf connection to the hub: "" while there is
// none, and a name that differs from every earlier one once it has been
// made again (a server started again after a store failure names its
// connections afresh). A message the hub sent over a connection that is
// still up is on its way, however slow the link; one sent over a
// connection since replaced may be lost, and so may the hub's record of a
// pull made before it (the downloader's watchdog).
func (s *Server) HubLink() string {
	ns, leafs := s.hubLeafs()
	if len(leafs) == 0 {
		return ""
	}
	ids := make([]uint64, 0, len(leafs))
	for _, l := range leafs {
		ids = append(ids, l.ID)
	}
	slices.Sort(ids) // Leafz lists them in no order
	name := ns.ID()  // random for each server started
	for _, id := range ids {
		name += "/" + strconv.FormatUint(id, 10)
	}
	return name
}

// hubLeafs is the running server and its leaf connections to the hub
// (none while down).
func (s *Server) hubLeafs() (*server.Server, []*server.LeafInfo) {
	ns := s.nats()
	if ns == nil || ns.NumLeafNodes() == 0 {
		return ns, nil
	}
	lz, err := ns.Leafz(nil)
	if err != nil {
		return ns, nil
	}
	return ns, lz.Leafs
}

// Failed is closed when the server reports a fatal error after Start; Err
// then returns it. The owner should treat the server as broken and stop.
func (s *Server) Failed() <-chan struct{} { return s.logger.failed }

// Err returns the server's fatal error, or nil.
func (s *Server) Err() error { return s.logger.fatal() }

// Close shuts the server down, waits for it (bounded) and releases the
// state dir lock. Draining client connections first is the caller's
// business. Calling Close again returns the first result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.stopGuard != nil {
			s.stopGuard()
		}
		s.restartMu.Lock() // let a restart in progress finish
		defer s.restartMu.Unlock()
		if err := shutdown(s.nats()); err != nil {
			// The server may still be writing to the store: keep the
			// lock so no second server opens it; process exit drops it.
			s.closeErr = fmt.Errorf("embedded: close: %w; state dir stays locked", err)
			return
		}
		if err := s.lock.release(); err != nil {
			s.closeErr = fmt.Errorf("embedded: close: %w", err)
		}
	})
	return s.closeErr
}

// shutdown stops ns and waits at most shutdownTimeout. On a timeout the
// helper goroutine stays behind with the stuck server; the caller is
// expected to exit. A server already shut down returns at once.
func shutdown(ns *server.Server) error {
	done := make(chan struct{})
	go func() {
		ns.Shutdown()
		ns.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(shutdownTimeout):
		return fmt.Errorf("shutdown did not finish within %s", shutdownTimeout)
	}
}
