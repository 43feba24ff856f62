package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/foreground"
	"github.com/pisyncd/pisyncd/internal/fsutil"
	"github.com/pisyncd/pisyncd/internal/metrics"
	"github.com/pisyncd/pisyncd/internal/redact"
	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/replicate"
	"github.com/pisyncd/pisyncd/search"
	"github.com/pisyncd/pisyncd/watch"
	"github.com/pisyncd/pisyncd/web"
)

// Daemon is one running pisyncd: the embedded server, the event log and the
// workers that feed it.
type Daemon struct {
	cfg    *config.Config
	logger *slog.Logger
	hints  *hintState // the causes of the hub link's failures, as hinted in the log
	srv    *embedded.Server
	relay  *embedded.ReadRelay // the local listener's readers' direct gets; nil without a listener
	nc     *nats.Conn
	log    *eventlog.Local
	tailer *watch.Tailer
	fwd    *eventlog.Forwarder
	dl     *eventlog.Downloader
	crypt  *eventlog.Crypt // end-to-end encryption; nil without a hub
	repl   *replicate.Replicator
	gate   *admit.Gate
	all    *eventlog.All
	proj   *projection.Worker
	web    *web.Server
	// httpURL is the web view's address once its listener is bound
	// (pisyncd web); "" without PISYNC_HTTP_ADDR.
	httpURL atomic.Pointer[string]
	// The full-text index and its worker; nil when PISYNC_SEARCH is off.
	searchIx *search.Index
	searchW  *search.Worker
	// caughtUp is closed once the projection has caught up with the
	// tailer's first read (afterFirstRead): the search index starts then.
	caughtUp chan struct{}
	// settled is closed once afterFirstRead has returned: the start's
	// memory given back (benchmarks that run several daemons in one
	// process wait for it, so that one's collection does not land in
	// another's measured work).
	settled chan struct{}
	// releaseGC ends the collector's start target (settle.go); nil when
	// the daemon holds none (a first start, or opened only to read the
	// store).
	releaseGC func()
	// fg is held while a person waits on a context or a session page:
	// the search index's batches wait for it.
	fg    *foreground.Gate
	store *embedded.StoreWatch
	// rootLock keeps a second daemon, with another state dir, off the
	// sessions dir (OpenDaemon; commands that open the store alone
	// follow no files and leave it).
	rootLock *watch.RootLock
	reg      *prometheus.Registry
	started  time.Time

	// waitingForHub: the first read waits for the first copy from the
	// hub (firstcopy.go).
	waitingForHub atomic.Bool

	eraseMu sync.Mutex   // one erase at a time (erase.go)
	erased  atomic.Int64 // sessions erased here on request
}

// OpenStore takes the state dir, starts the embedded server and opens the
// event log: everything a command that reads the store needs.
func OpenStore(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*Daemon, error) {
	return openStoreAs(ctx, cfg, logger, "")
}

// openStoreAs is OpenStore for holder, the command that opens the store
// while no daemon runs ("pisyncd events"; "" for the daemon): what a
// daemon or another command started meanwhile is told holds it.
func openStoreAs(ctx context.Context, cfg *config.Config, logger *slog.Logger, holder string) (_ *Daemon, err error) {
	// Before the node id is written into it: a folder that is not
	// pisyncd's to close (someone's, open to others) held a node-id of
	// pisyncd's making by the time the server's start looked, and was
	// taken for pisyncd's own (a verifying probe on 2026-12-07).
	if err := embedded.PrivateStateDir(cfg.StateDir, logger); err != nil {
		return nil, fmt.Errorf("embedded: %w%s", err, config.WriteHint(err, "STATE_DIR"))
	}
	idFile := filepath.Join(cfg.StateDir, "node-id")
	if _, serr := os.Stat(idFile); errors.Is(serr, fs.ErrNotExist) && !storeExists(cfg) {
		// A first start that fails before the store is made (a hub URL
		// or seed file mistyped) leaves no node id behind: the next
		// start, with PISYNC_NODE_ID set as the hub knows it, was
		// refused, told the state dir belonged to the random id and
		// that lines were published under it, when nothing was.
		defer func() {
			if err != nil && !storeExists(cfg) {
				os.Remove(idFile)
			}
		}()
	}
	if err := cfg.EnsureNodeID(storeExists(cfg)); err != nil {
		return nil, err
	}
	hints := &hintState{nodeID: cfg.NodeID, creds: cfg.HubNkey != "" || cfg.HubCreds != "", hubCA: cfg.HubCA}
	logger = slog.New(hintHandler{logger.Handler(), hints})
	var seed []byte
	if cfg.HubNkey != "" {
		b, err := fsutil.ReadSetting(cfg.HubNkey, fsutil.SettingMax)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("PISYNC_HUB_NKEY %s: no such file: it is this node's seed file, made on the hub by `pisyncd hub add-node %s --out FILE` and copied here", cfg.HubNkey, cfg.NodeID)
		}
		if err != nil {
			return nil, fmt.Errorf("PISYNC_HUB_NKEY: %w", err)
		}
		if st, err := os.Stat(cfg.HubNkey); err == nil && st.Mode().Perm()&0o077 != 0 {
			logger.Warn("the nkey seed file is readable by others; chmod 600 it", "file", cfg.HubNkey)
		}
		seed = bytes.TrimSpace(b)
		// Checked here: the hub link takes any bytes, and a file that
		// is no seed (the hub's node file copied by mistake) made a link
		// that failed every second with "malformed seed" in the server's
		// log and nothing naming this setting.
		if kp, err := nkeys.FromSeed(seed); err != nil {
			return nil, fmt.Errorf("PISYNC_HUB_NKEY %s holds no nkey seed (%v): set it to the file `pisyncd hub add-node %s --out FILE` wrote on the hub, a single line beginning with SU", cfg.HubNkey, err, cfg.NodeID)
		} else if pub, _ := kp.PublicKey(); !nkeys.IsValidPublicUserKey(pub) {
			return nil, fmt.Errorf("PISYNC_HUB_NKEY %s holds the seed of another kind of key than a node's (it begins with %.2s, a node's with SU): set it to the file `pisyncd hub add-node %s --out FILE` wrote on the hub", cfg.HubNkey, seed, cfg.NodeID)
		}
	}
	if cfg.HubCreds != "" {
		// The hub link reads it again at every reconnect: a file, not a
		// pipe (which it would wait on for ever, or find empty).
		if st, err := os.Stat(cfg.HubCreds); err != nil {
			return nil, fmt.Errorf("PISYNC_HUB_CREDS: %w", err)
		} else if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("PISYNC_HUB_CREDS: %s is not a regular file; the hub link reads it again at every reconnect", cfg.HubCreds)
		}
	}
	srv, err := embedded.Start(ctx, embedded.Config{
		StateDir:       cfg.StateDir,
		Holder:         holder,
		NodeID:         cfg.NodeID,
		MaxMemory:      int64(cfg.MaxMemory),
		MaxStore:       int64(cfg.MaxStore),
		Listen:         cfg.Listen,
		Logger:         natsLogger(logger),
		HubURLs:        cfg.HubURLs,
		HubCredsFile:   cfg.HubCreds,
		HubNkeySeed:    seed,
		HubCAFile:      cfg.HubCA,
		HubInsecure:    cfg.HubInsecure,
		HubCompression: cfg.HubCompression,
		StoreCipher:    cfg.StoreCipher,
		StoreKeyFile:   cfg.StoreKeyFile,
	})
	if err != nil {
		return nil, inUse(err, listener{config.Prefix + "_LISTEN", cfg.Listen})
	}
	leafUp := func() bool { return srv.NATS().NumLeafNodes() > 0 }
	hints.leafUp.Store(&leafUp)
	// Replies to requests that cross to the hub come back on this node's
	// own inbox prefix, the only one the hub lets it receive.
	nc, err := srv.Connect(nats.Name("pisyncd"), nats.CustomInboxPrefix(embedded.InboxPrefix(cfg.NodeID)))
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("connect to embedded server: %w", err)
	}
	// A store made before `pisyncd erase` denies deleting messages, which
	// nats-server will not lift in place: it is copied into new streams
	// once, sequences unchanged (the snapshot waits in the state dir).
	start := time.Now()
	upgraded, err := eventlog.UpgradeStreams(ctx, nc, cfg.StateDir)
	if len(upgraded) > 0 {
		logger.Info("streams upgraded to allow erasing sessions", "streams", upgraded, "took", time.Since(start).Round(time.Millisecond))
	}
	if err != nil {
		nc.Close()
		srv.Close()
		return nil, err
	}
	lg, err := eventlog.OpenLocal(ctx, nc, cfg.NodeID)
	if err == nil {
		err = checkOwner(ctx, lg, cfg)
	}
	if err != nil {
		nc.Close()
		srv.Close()
		return nil, err
	}
	return &Daemon{cfg: cfg, logger: logger, hints: hints, srv: srv, nc: nc, log: lg, started: time.Now(), fg: foreground.New(), caughtUp: make(chan struct{}), settled: make(chan struct{})}, nil
}

// checkOwner refuses a store that holds another node's lines than the
// node id settled for it: EnsureNodeID keeps the id in STATE_DIR/node-id,
// and a file edited or damaged (cut short to another valid id) made the
// tailer publish every session file again, as new lines of a new node.
func checkOwner(ctx context.Context, lg *eventlog.Local, cfg *config.Config) error {
	owner, err := lg.Owner(ctx)
	if err != nil || owner == "" || owner == cfg.NodeID {
		return err
	}
	file := filepath.Join(cfg.StateDir, "node-id")
	return fmt.Errorf("the store in %s holds the lines of node %q, but this node's id is %q (%s, or %s_NODE_ID): the id was changed or the file damaged, and under another id pisyncd would publish every session again as new lines. "+
		"Put the store's id back (printf '%%s\\n' %s > %s, and unset %s_NODE_ID or set it to %s), or give the new id a state dir of its own (%s_STATE_DIR)",
		cfg.StateDir, owner, cfg.NodeID, file, config.Prefix, owner, file, config.Prefix, owner, config.Prefix)
}

// openReplication sets up the hub side: the state bucket, PI_ALL, the
// forwarder (up), the downloader (down) and the replicator.
func (d *Daemon) openReplication(ctx context.Context) error {
	js := d.log.JetStream()
	state, err := eventlog.OpenState(ctx, js)
	if err != nil {
		return err
	}
	all, err := eventlog.OpenAll(ctx, js)
	if err != nil {
		return err
	}
	d.all = all
	d.crypt = eventlog.NewCrypt(keyring.Path(d.cfg.StateDir, d.cfg.KeyFile), d.cfg.NodeID, d.cfg.Encrypt == "on")
	d.crypt.SetLogger(d.logger.With("component", "encryption"))
	// Tombstones owed for other nodes' erases, kept over restarts.
	if err := d.crypt.UseState(ctx, state); err != nil {
		return err
	}
	d.gate = admit.New(d.cfg.NodeID, admit.Limits{
		MaxLine: int(d.cfg.MaxLine), SessionsPerHour: d.cfg.RemoteSessionsPerHour, BytesPerHour: int64(d.cfg.RemoteBytesPerHour),
	}, all, d.logger.With("component", "admission"))
	d.gate.Trust(d.cfg.Trusted())
	d.gate.WatchOwn(d.log) // another machine running as this one (admit/twin.go)
	d.gate.PutOffOwn()     // until the tailer's first read: a restored state dir's sessions come back then
	d.dl, err = eventlog.NewDownloader(d.nc, all, embedded.HubDomain, eventlog.DownloaderOptions{
		Admit: d.gate, State: state, MaxLine: int(d.cfg.MaxLine), Crypt: d.crypt, Logger: d.logger.With("component", "downloader"),
		HubLink: d.srv.HubLink,
	})
	if err != nil {
		return err
	}
	ropts, err := d.replicaOptions()
	if err != nil {
		return err
	}
	d.fwd, err = eventlog.NewForwarder(d.log, d.nc, embedded.HubDomain, state, d.logger.With("component", "forwarder"))
	if err != nil {
		return err
	}
	d.fwd.WatchLink(d.srv.HubLink)
	worked := func() bool { return d.fwd.Worked() || d.dl.Worked() }
	d.hints.worked.Store(&worked)
	if d.cfg.Encrypt != "off" {
		d.fwd.Encrypt(d.crypt)
	} else {
		d.crypt.NoSealing()
	}
	ropts.Erased = d.crypt.EraseKeys
	d.repl = replicate.New(all, state, nil, ropts)
	return nil
}

// replicaOptions are the replicator's options from the settings.
func (d *Daemon) replicaOptions() (replicate.Options, error) {
	pm, err := replicate.ParsePathMap(d.cfg.PathMap)
	if err != nil {
		return replicate.Options{}, fmt.Errorf("PISYNC_PATH_MAP: %w", err)
	}
	return replicate.Options{
		Root: d.cfg.SessionsDir, Node: d.cfg.NodeID, PathMap: pm,
		KeepDeleted: d.cfg.Delete == "ignore", Idle: d.cfg.IdleAfter, Trusted: d.cfg.Trusted(),
		Logger: d.logger.With("component", "replicator"),
	}, nil
}

// knownWithoutHub gives the tailer, on a run without a hub, what the
// replicator knows of a store that was run with one: the session files
// hold lines it copied from other machines, which PI_ALL holds. Without
// them the tailer published every copied line as this machine's, and the
// next start with the hub forwarded them all to the team as new (a start
// without the hub's settings: a shell without the variables, a service
// without its environment file).
func (d *Daemon) knownWithoutHub(ctx context.Context, topts *watch.Options) error {
	js := d.log.JetStream()
	all, err := eventlog.ExistingAll(ctx, js)
	if err != nil || all == nil {
		return err
	}
	state, err := eventlog.OpenState(ctx, js)
	if err != nil {
		return err
	}
	ropts, err := d.replicaOptions()
	if err != nil {
		return err
	}
	// Not run: asked only what the store knows.
	known := replicate.New(all, state, nil, ropts)
	topts.Known, topts.Deleted = known.KnownLines, known.Deleted
	d.logger.Info("no hub this run (PISYNC_HUB_URLS), but this store was run with one: the lines copied from other machines are known by its copy of the hub's lines and not published as this machine's")
	return nil
}

// Close stops the connection and the server and releases the state dir.
func (d *Daemon) Close() error {
	if d.releaseGC != nil {
		d.releaseGC()
	}
	var errs []error
	if d.searchIx != nil {
		errs = append(errs, d.searchIx.Close())
	}
	if d.relay != nil {
		d.relay.Close()
	}
	if d.nc != nil {
		// A connection still reconnecting after a restart of the event
		// store (embedded.StoreWatch) has nothing in flight to drain: the
		// workers that publish have stopped.
		if err := d.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrConnectionReconnecting) {
			errs = append(errs, fmt.Errorf("drain: %w", err))
		}
		d.nc.Close()
	}
	if d.srv != nil {
		errs = append(errs, d.srv.Close())
	}
	if d.rootLock != nil {
		errs = append(errs, d.rootLock.Close())
	}
	return errors.Join(errs...)
}

// OpenDaemon opens the store and builds the workers: the tailer and, with a
// hub, the forwarder and the replicator. Run runs them.
func OpenDaemon(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*Daemon, error) {
	// The sessions dir's lock comes first: a daemon refused for it leaves
	// nothing behind, no state dir, node id or store of its own.
	rootLock, err := lockSessionsDir(cfg, logger)
	if err != nil {
		return nil, err
	}
	d, err := openDaemonLocked(ctx, cfg, logger, rootLock)
	if err != nil && rootLock != nil {
		rootLock.Close()
	}
	return d, err
}

// lockSessionsDir takes the sessions dir's lock: nil, nil on a file system
// that takes none (the daemon runs, unguarded against a second one).
func lockSessionsDir(cfg *config.Config, logger *slog.Logger) (*watch.RootLock, error) {
	rootLock, err := watch.LockRoot(cfg.SessionsDir)
	if errors.Is(err, watch.ErrRootInUse) {
		// The same daemon started twice holds the state dir as well: that
		// is what to say, not that another state dir is in use.
		if inUse := embedded.StateDirInUse(cfg.StateDir); inUse != nil {
			return nil, inUse
		}
		// The holder has not the state dir: another one's, or this one's
		// while it waits to start (a first start on a full disk).
		var who string
		if e := (*watch.RootInUseError)(nil); errors.As(err, &e) && e.PID > 0 {
			who = fmt.Sprintf(" (process %d)", e.PID)
		}
		return nil, fmt.Errorf("PISYNC_SESSIONS_DIR %s is followed by another pisyncd%s: two would publish every line twice, under two node ids. If it is this one started already (the same PISYNC_STATE_DIR, waiting to start), `pisyncd status` says what it waits for; else stop it, or start this one with its PISYNC_STATE_DIR", cfg.SessionsDir, who)
	} else if errors.Is(err, watch.ErrSessionsDir) {
		// Not a lock the file system refuses: no daemon could follow it.
		return nil, fmt.Errorf("%w%s", err, config.WriteHint(err, "SESSIONS_DIR"))
	} else if err != nil {
		// A file system that takes no lock (some network and container
		// mounts): the daemon runs, unguarded against a second one.
		logger.Warn("the sessions dir could not be locked: a second pisyncd over it, with a state dir of its own, would not be refused", "dir", cfg.SessionsDir, "err", err)
		return nil, nil
	}
	return rootLock, nil
}

// openDaemonLocked is OpenDaemon under the sessions dir's lock, which the
// daemon holds from then on; on failure the caller keeps it.
func openDaemonLocked(ctx context.Context, cfg *config.Config, logger *slog.Logger, rootLock *watch.RootLock) (*Daemon, error) {
	release := holdStartGC() // from the store's recovery on
	d, err := openStoreAfterCommands(ctx, cfg, logger)
	if err != nil {
		release()
		return nil, err
	}
	d.rootLock = rootLock
	if info, err := d.log.Info(ctx); err == nil && info.LastSeq == 0 {
		release() // a first start: only a restart gains (settle.go)
	} else {
		d.releaseGC = release
	}
	if err := d.build(ctx); err != nil {
		d.rootLock = nil // the caller's still: it may try again under it
		d.Close()
		return nil, err
	}
	return d, nil
}

// republish has PI_LOCAL and PI_ALL republish each line as they store it
// while the local listener's readers may follow them, and not otherwise
// (eventlog.LivePrefix says what it costs). The projection does the same
// with its bucket (projection.Options.Live).
func (d *Daemon) republish(ctx context.Context) error {
	js := d.log.JetStream()
	for _, stream := range []string{eventlog.LocalStream, eventlog.AllStream} {
		if stream == eventlog.AllStream && d.all == nil {
			continue // no hub: PI_ALL is not written
		}
		if err := eventlog.SetLive(ctx, js, stream, d.cfg.Listen != ""); err != nil {
			return err
		}
	}
	return nil
}

func (d *Daemon) build(ctx context.Context) error {
	topts := watch.Options{
		Root:           d.cfg.SessionsDir,
		MaxLine:        int(d.cfg.MaxLine),
		Workers:        d.cfg.Workers,
		RescanInterval: d.cfg.RescanInterval,
		MemoryBudget:   tailerBudget(int64(d.cfg.MemoryBudget)),
		Logger:         d.logger.With("component", "tailer"),
		RootFile:       filepath.Join(d.cfg.StateDir, "sessions-dir"),
	}
	if len(d.cfg.HubURLs) > 0 {
		if err := d.openReplication(ctx); err != nil {
			return err
		}
		topts.Known, topts.Deleted = d.repl.KnownLines, d.repl.Deleted
	} else if err := d.knownWithoutHub(ctx, &topts); err != nil {
		return err
	}
	if err := d.republish(ctx); err != nil {
		return err
	}
	var err error
	d.tailer = watch.New(d.log, topts)
	bodies, readAhead := projectionBudget(int64(d.cfg.MemoryBudget))
	var mapCwd func(string) string
	if pm, err := replicate.ParsePathMap(d.cfg.PathMap); err == nil && !pm.Empty() {
		mapCwd = pm.Map // as the replicator maps the headers it writes
	}
	d.proj, err = projection.New(d.nc, projection.Options{
		Node: d.cfg.NodeID, All: len(d.cfg.HubURLs) > 0, Rules: d.cfg.RuleSet(), Live: d.cfg.Listen != "",
		MapCwd:       mapCwd,
		Logger:       d.logger.With("component", "projection"),
		MaxBodyBytes: bodies, ReadAhead: readAhead, SessionsDir: d.cfg.SessionsDir,
		LocalFiles:      d.tailer.RelFilesFor,
		WriteAfter:      d.tailer.Ready(), // views written about once during the first read
		WriteAfterBytes: firstReadOverlap(int64(d.cfg.MemoryBudget)),
	})
	if err != nil {
		return err
	}
	if d.repl != nil {
		d.repl.SetTracker(d.tailer)
	}
	if d.cfg.SearchOn() {
		if err := d.openSearch(); err != nil {
			return err
		}
	}
	if d.web, err = newWeb(d); err != nil {
		return err
	}
	if err := d.watchStore(); err != nil {
		return err
	}
	d.reg = prometheus.NewRegistry()
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoCollector(readBuildInfo()))
	d.reg.MustRegister(d.tailer.Collectors()...)
	d.reg.MustRegister(d.tailer.RetryCollectors()...)
	d.reg.MustRegister(d.store.Collectors()...)
	d.reg.MustRegister(diskCollectors(d.cfg)...)
	d.reg.MustRegister(d.proj.Collectors()...)
	if d.relay, err = d.srv.OpenReadRelay(d.logger.With("component", "read relay")); err != nil {
		return err
	}
	if d.relay != nil {
		d.reg.MustRegister(d.relay.Collectors()...)
	}
	if d.searchW != nil {
		d.reg.MustRegister(d.searchW.Collectors()...)
	}
	d.reg.MustRegister(metrics.Counter("sessions_erased_total", "Sessions erased on this machine at the user's request (pisyncd erase).", d.erased.Load))
	if d.repl != nil {
		d.reg.MustRegister(d.repl.Collectors()...)
		d.reg.MustRegister(d.fwd.Collectors()...)
		d.reg.MustRegister(metrics.Gauge("hub_link_up", "1 while the embedded server's link to the hub (a leaf connection) is up.", metrics.Bool(d.srv.HubLinked)))
		d.reg.MustRegister(d.dl.Collectors()...)
		d.reg.MustRegister(d.gate.Collectors()...)
		d.reg.MustRegister(d.crypt.Collectors()...)
	}
	return nil
}

// maxHTTPConns bounds the web listener's open connections. Every user of
// the machine reaches its loopback port, and each connection holds a file
// descriptor that the tailer and the store need too: a local client
// holding 20,000 idle connections stalled publishing (too many open
// files). A browser keeps six a host; 256 leave room for tabs, event
// streams and programs. Past it a new connection waits to be accepted.
// The last ownHTTPConns of them are this user's: programs of other users
// cannot keep it out (web.LimitListener).
const (
	maxHTTPConns = 256
	ownHTTPConns = 32
)

// httpIdleTimeout closes a kept-alive connection that carries no request
// (a request without the token is answered and its connection closed:
// web.Server's guard).
const httpIdleTimeout = time.Minute

// httpServer is an HTTP server of h for a local listener: a request's
// header within 5 s, an idle connection closed after httpIdleTimeout, the
// server's own complaints in logger's log.
func httpServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: httpIdleTimeout,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
}

// Run runs the daemon's workers until ctx ends or one of them fails.
func (d *Daemon) Run(ctx context.Context) error {
	ctl, err := listenControl(d.cfg.StateDir)
	if err != nil {
		return err
	}
	var httpLn net.Listener
	if d.cfg.HTTPAddr != "" {
		if httpLn, err = net.Listen("tcp", d.cfg.HTTPAddr); err != nil {
			ctl.Close()
			return inUse(fmt.Errorf("http listener: %w", err), listener{config.Prefix + "_HTTP_ADDR", d.cfg.HTTPAddr})
		}
		httpLn = web.LimitListener(httpLn, maxHTTPConns, ownHTTPConns, webStall)
	}

	if err := d.resumeErases(ctx); err != nil {
		ctl.Close()
		if httpLn != nil {
			httpLn.Close()
		}
		return err
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	fail := func(err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			cancel(err)
		}
	}
	wg.Add(3)
	go func() {
		defer wg.Done()
		fail(d.store.Run(ctx))
	}()
	go func() {
		defer wg.Done()
		fail(d.proj.Run(ctx))
	}()
	go func() {
		defer wg.Done()
		if err := d.waitFirstCopy(ctx); err != nil {
			fail(err)
			return
		}
		fail(d.tailer.Run(ctx))
	}()
	if d.searchW != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail(d.searchW.Run(ctx))
		}()
	}
	if d.relay != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail(d.relay.Run(ctx))
		}()
	}
	if d.rootLock != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail(d.rootLock.Run(ctx, d.cfg.RescanInterval))
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		settled := d.afterFirstRead(ctx)
		close(d.settled)
		if os.Getenv("GOGC") == "" { // a collector the user tuned is left alone
			if settled {
				settled = d.afterSubjectState(ctx)
			}
			giveBack(ctx, d.logger, settled, d.dropRebuildable) // for every burst after it
		}
	}()
	if d.fwd != nil {
		wg.Add(3)
		go func() {
			defer wg.Done()
			fail(d.fwd.Run(ctx))
		}()
		go func() {
			defer wg.Done()
			fail(d.dl.Run(ctx))
		}()
		go func() {
			defer wg.Done()
			// The replicator looks up which local file holds a session:
			// it starts once the tailer has read every file once.
			select {
			case <-d.tailer.Ready():
			case <-ctx.Done():
				return
			}
			d.gate.SettleOwn(ctx, func(sid string) bool { return len(d.tailer.FilesFor(sid)) > 0 })
			fail(d.repl.Run(ctx))
		}()
	}
	servers := []*http.Server{httpServer(d.controlHandler(), d.logger)}
	lns := []net.Listener{ctl}
	if httpLn != nil {
		view := httpServer(d.metricsHandler(), d.logger)
		// The web view's event streams never end by themselves: its
		// requests end with the daemon's context, so Shutdown does not
		// wait for them.
		view.BaseContext = func(net.Listener) context.Context { return ctx }
		// Whose program sent the view's cookie (web.ConnContext).
		view.ConnContext = web.ConnContext
		servers = append(servers, view)
		lns = append(lns, httpLn)
		u := "http://" + httpLn.Addr().String() + "/"
		d.httpURL.Store(&u)
		d.logger.Info("serving the web view, /metrics and /healthz (pisyncd web prints the view's link with its token)", "url", u)
	}
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Serve(lns[i]); !errors.Is(err, http.ErrServerClosed) {
				fail(fmt.Errorf("http: %w", err))
			}
		}()
	}
	if u := d.srv.ClientURL(); u != "" {
		d.logger.Info("local subscriber listener up (read-only)", "url", u, "credentials", d.srv.CredentialsFile())
	}
	// The hub's URLs, when set: the one word in the log that says this
	// machine replicates (its link coming up logs nothing).
	running := []any{"node", d.cfg.NodeID, "sessions_dir", d.cfg.SessionsDir, "state_dir", d.cfg.StateDir, "store_cipher", d.srv.StoreCipher()}
	if len(d.cfg.HubURLs) > 0 {
		running = append(running, "hub", strings.Join(redact.URLs(d.cfg.HubURLs), ","))
	}
	d.logger.Info("pisyncd running", running...)

	select {
	case <-ctx.Done():
	case <-d.srv.Failed():
		cancel(fmt.Errorf("embedded server failed: %w", d.srv.Err()))
	}
	cause := context.Cause(ctx)
	d.logger.Info("stopping", "cause", cause)
	sctx, scancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer scancel()
	for _, s := range servers {
		s.Shutdown(sctx)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		return fmt.Errorf("stop: workers did not finish within %v", d.cfg.ShutdownTimeout)
	}
	os.Remove(filepath.Join(d.cfg.StateDir, config.ControlSocket))
	if parent.Err() != nil {
		return nil // asked to stop: not an error
	}
	return cause
}

// openSearch opens the full-text index (made afresh when missing, unreadable
// or of another format) and builds its worker.
func (d *Daemon) openSearch() error {
	ix, err := search.Open(filepath.Join(d.cfg.StateDir, "search"))
	if err != nil {
		return err
	}
	w, err := search.NewWorker(d.nc, ix, search.Options{
		Node: d.cfg.NodeID, All: len(d.cfg.HubURLs) > 0,
		BatchBytes: searchBatch(int64(d.cfg.MemoryBudget)),
		StartAfter: d.caughtUp, // neither the first read nor its projection is slowed by indexing
		Foreground: d.searchYield(),
		Logger:     d.logger.With("component", "search"),
	})
	if err != nil {
		ix.Close()
		return err
	}
	d.searchIx, d.searchW = ix, w
	return nil
}

// searchYield is what each of the search index's batches waits for, at
// most 2 s a batch: a person waiting on a context or a session page, and,
// with a hub, a catch-up from it or a backlog of this machine's lines on
// their way to it. The index is derived data; moving lines between the
// machines is the daemon's work, and the index building beside it took
// 40% of a catch-up's rate (9.2-9.6k lines/s against 15.4-17.8k without
// it: docs/PERFORMANCE.md, "The search index's batches").
func (d *Daemon) searchYield() foreground.Waiter {
	var idle []func() <-chan struct{}
	if d.dl != nil {
		idle = append(idle, d.dl.Idle)
	}
	if d.fwd != nil {
		idle = append(idle, d.fwd.Idle)
	}
	return d.fg.AndIdle(idle...)
}

// SearchHandler serves GET /api/search (search.Index.Handler), or answers
// 503 saying why when the index is off.
func (d *Daemon) SearchHandler() http.Handler {
	if d.searchIx != nil {
		return d.searchIx.Handler(d.searchW.Unindexed)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, `{"error":"search is off on this machine (PISYNC_SEARCH, docs/SEARCH.md)"}`)
	})
}

func runCommand(args []string, stderr io.Writer) error {
	if wantsHelp(args) {
		return &helpRequest{Usage: "pisyncd [run]   (settings are PISYNC_* variables: pisyncd help)"}
	}
	if len(args) > 0 {
		return &usageError{Msg: fmt.Sprintf("run takes no arguments, got %q; settings are PISYNC_* variables (pisyncd help)", args)}
	}
	defer outliveLogReader()()
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	logger := cfg.Logger(stderr)
	// The first line says which build runs, for every report that
	// quotes the log.
	logger.Info("pisyncd starting", readBuildInfo().LogAttrs()...)
	for _, w := range config.Unknown(os.Environ()) {
		logger.Warn(w)
	}
	setMemoryLimit(int64(cfg.MemoryBudget), logger)
	// SIGHUP too (the terminal it runs in closed): its default ended the
	// daemon at once, its lock and control socket left behind, no
	// "stopped". A hub reloads on SIGHUP; a workstation has nothing to
	// reload (its settings are read at start), so it stops as on SIGTERM.
	ctx, stop := signalContext(stderr, syscall.SIGHUP)
	defer stop()
	d, err := openDaemonWaiting(ctx, cfg, logger)
	if err != nil || d == nil {
		return err // d == nil: stopped while waiting for disk space
	}
	runErr := d.Run(ctx)
	closeErr := d.Close()
	if err := errors.Join(runErr, closeErr); err != nil {
		return err
	}
	// Said only of a stop that finished: one cut short by
	// PISYNC_SHUTDOWN_TIMEOUT returned its error above.
	logger.Info("pisyncd stopped")
	return nil
}

// openStoreAfterCommands is OpenStore for the daemon, which waits while a
// command holds the state dir, one that reads the store while no daemon
// runs (pisyncd events piped to a pager): before, the daemon exited at once,
// and under its service restarted every 2 s until systemd gave up on it.
// Another daemon's hold is an error at once, as before.
func openStoreAfterCommands(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*Daemon, error) {
	var told bool
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		d, err := OpenStore(ctx, cfg, logger)
		var held *embedded.InUseError
		if !errors.As(err, &held) || held.Holder == "" {
			return d, err
		}
		if !told {
			logger.Warn("waiting for a command that reads the store to end; the daemon starts once it has", "command", held.Holder, "pid", held.PID)
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (stopped while waiting for it)", err)
		case <-t.C:
		}
	}
}
