package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
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
)

// Server is a running embedded nats-server that owns its state dir.
type Server struct {
	ns     *server.Server
	logger *natsLogger
	lock   *dirLock

	inProcessKey nkeys.KeyPair // ephemeral per Start, only ever in memory
	clientURL    string
	credsPath    string

	// Hub nodes only: their configuration, the in-process admin key of
	// each team's account, and the registered nodes.
	hub    *HubConfig
	admins map[string]nkeys.KeyPair
	nodes  []Node

	// jsConfig is what JetStream was enabled with (workstations only), for
	// a restart in place after a write error (StoreWatch); jsMu keeps such
	// a restart and Close apart.
	jsConfig *server.JetStreamConfig
	jsMu     sync.Mutex
	// storeHint gets a value when the server logs an error that may be a
	// store write failure, so StoreWatch checks at once.
	storeHint chan struct{}

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
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: state dir: %w", err)
	}
	lock, err := lockDir(cfg.StateDir)
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
		if s != nil && s.ns != nil {
			if serr := s.shutdown(); serr != nil {
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
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("in-process key: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("in-process key: %w", err)
	}
	s = &Server{
		logger:       newNATSLogger(cfg.Logger),
		lock:         lock,
		inProcessKey: kp,
	}
	opts := &server.Options{
		ServerName:         ServerName(cfg.NodeID),
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
	if err := applyLeaf(opts, cfg); err != nil {
		return nil, err
	}
	s.jsConfig = jetStreamConfig(opts)
	for _, u := range plainCredentialURLs(cfg) {
		// Only reachable with HubInsecure: withDefaults refuses otherwise.
		cfg.Logger.Warn("INSECURE: this node's hub credentials cross a plain-text connection; anyone on the network path can read and replay them (HubInsecure / PISYNC_HUB_INSECURE)", "url", u)
	}
	var creds clientContext
	if cfg.Listen != "" {
		host, port, err := loopbackAddr(cfg.Listen)
		if err != nil {
			return nil, err
		}
		s.credsPath = filepath.Join(cfg.StateDir, credsFileName)
		creds, err = loadOrCreateCreds(s.credsPath, cfg.Logger)
		if err != nil {
			return nil, err
		}
		// The server gets a bcrypt hash, not the password: it warns
		// about plaintext passwords otherwise. The password is 256
		// random bits, so the minimum cost is plenty and keeps a local
		// tool's connect fast.
		hash, err := bcrypt.GenerateFromPassword([]byte(creds.Password), bcrypt.MinCost)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		opts.DontListen = false
		opts.Host, opts.Port = host, port
		opts.Users = []*server.User{{
			Username:               creds.User,
			Password:               string(hash),
			AllowedConnectionTypes: connTypes(jwt.ConnectionTypeStandard),
			Permissions:            listenerPermissions(cfg.NodeID),
		}}
	}

	if err := s.launch(ctx, opts, cfg.Logger, cfg.Trace); err != nil {
		return s, err
	}
	if s.credsPath != "" {
		s.clientURL = "nats://" + s.ns.Addr().String()
		if creds.URL != s.clientURL {
			creds.URL = s.clientURL
			if err := saveCreds(s.credsPath, creds); err != nil {
				return s, err
			}
		}
	}
	return s, nil
}

// launch creates and starts the server and waits until it is ready.
func (s *Server) launch(ctx context.Context, opts *server.Options, logger *slog.Logger, trace bool) error {
	ns, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("new server: %w", err)
	}
	s.ns = ns
	debug := logger.Enabled(ctx, slog.LevelDebug)
	s.storeHint = make(chan struct{}, 1)
	ns.SetLoggerV2(&hintLogger{natsLogger: s.logger, hint: s.storeHint}, debug, trace, false)
	ns.Start()
	return s.waitReady(ctx)
}

// waitReady polls in short steps rather than one ReadyForConnections call
// so that a fatal error or a cancelled ctx ends the wait at once: after
// some Fatalf paths the server never completes start-up.
func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	for !s.ns.ReadyForConnections(100 * time.Millisecond) {
		if err := s.logger.fatal(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("start: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start: server not ready for connections after %s", readyTimeout)
		}
	}
	if err := s.logger.fatal(); err != nil {
		return err
	}
	if !s.ns.JetStreamEnabled() {
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
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	if s.closed.Load() {
		return nil, errors.New("embedded: connect: server is closed")
	}
	opts = append(opts, nats.InProcessServer(s.ns))
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

// ClientURL is the loopback listener's URL, or "" without a listener.
func (s *Server) ClientURL() string { return s.clientURL }

// CredentialsFile is the path of the listener credentials (a nats CLI
// context file), or "" without a listener.
func (s *Server) CredentialsFile() string { return s.credsPath }

// NATS exposes the underlying server for advanced use and tests.
func (s *Server) NATS() *server.Server { return s.ns }

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
		s.jsMu.Lock() // let a restart of JetStream in progress finish
		defer s.jsMu.Unlock()
		if err := s.shutdown(); err != nil {
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

// shutdown stops the server and waits at most shutdownTimeout. On a
// timeout the helper goroutine stays behind with the stuck server; the
// caller is expected to exit.
func (s *Server) shutdown() error {
	done := make(chan struct{})
	go func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(shutdownTimeout):
		return fmt.Errorf("shutdown did not finish within %s", shutdownTimeout)
	}
}
