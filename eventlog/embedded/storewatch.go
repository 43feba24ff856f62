package embedded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/pisyncd/pisyncd/internal/metrics"
)

// What nats-server (2.15) does when a file store cannot write, and why the
// store needs a watch:
//
//   - The file store and the stream keep the first write error
//     (filestore.go setWriteErr, stream.go setWriteErrLocked) and refuse
//     every later write with it. Nothing clears it while the stream is
//     loaded: freeing space changes nothing until the stream is read from
//     disk again, which used to take a restart of the daemon.
//   - The publish that hit the error gets no reply at all (stream.go: "We
//     don't want to respond back to the user"), nor does any later one, so
//     a client only sees its own timeout.
//   - Some paths (a permission error, an out-of-space mirror, source or
//     raft write) shut JetStream down instead, and only a config reload
//     or a restart turns it on again.
//
// The server's own health check reports both in single-server mode: each
// stream's write error, and JetStream being off. StoreWatch asks it every
// 250 ms while in-process clients write to the server, every 5 s once none
// has for 5 s (pace), and at once when the server logs an error or a
// warning, as it does for a stream's write error; it says
// at once that the store cannot write (Writable, Stats, the log), waits
// until a probe write beside the store succeeds, and then restarts the
// whole embedded server: the old server.Server is shut down and a new one
// started from the same options, which reads the streams back from disk
// without the error. The state dir lock is ours and stays held; the
// in-process connections reconnect to the new server by themselves
// (Connect), the listener comes back on its port and the leaf connection
// to the hub is made again.
//
// Not JetStream alone in the same server, as upstream's config reload
// does: nats-server 2.15's ShutdownJetStream leaves the old $JS.API.>
// subscription behind, whose dispatcher reads the API queue that the next
// EnableJetStream replaces (a data race) and gets every later API request
// too.

const (
	// watchInterval is how often the health check runs while clients
	// write to the server: a write error is reported within it.
	watchInterval = 250 * time.Millisecond
	// quietTicks is how many ticks without a write from an in-process
	// client (Server.sent) pass between two health checks, and how many
	// intervals apart the watch ticks from then on (pace): 5 s at the
	// default interval. The check reads the store's folders and looks up
	// every stream; at four a second it was an idle daemon's largest cost
	// (docs/PERFORMANCE.md, "An idle daemon's costs"). A store fails when
	// it is written to, and a write of ours makes the next tick check;
	// a failure the server logs is checked at once (storeHint), and one a
	// client's publish ran into is reported (Suspect). What is left for the
	// quiet checks: writes of clients over the listener, and the server's
	// own (limits, expiries).
	quietTicks = 20
	// probeSize is written and synced to learn whether the disk takes
	// writes again: the largest message the server stores at once.
	probeSize = maxPayload
	// recoverFirst and recoverMost bound the pause between attempts to
	// bring the store back.
	recoverFirst, recoverMost = 250 * time.Millisecond, 2 * time.Second
	// suspectEvery spaces the probes that suspicions ask for: writes that
	// keep failing for another reason (thousands of files retrying) must
	// not become a probe write after every one. A full disk stays full,
	// and its failures go on past the pause.
	suspectEvery = time.Second
)

// Store states, as Stats reports them.
const (
	StoreOK         = "ok"
	StoreFailing    = "failing"    // writes fail; waiting until the disk takes writes
	StoreRecovering = "recovering" // the embedded server is being restarted
	// StoreAtLimit: the store holds its JetStream limit (MaxStore), less
	// than a largest message from it. The server refuses every write that
	// would pass it ("insufficient resources") and reports itself
	// healthy: the disk has room, so there is nothing to recover, and only
	// room made in the store (an erase) or a larger limit, at a restart,
	// ends it.
	StoreAtLimit = "at-limit"
)

// StoreWatchOptions configure a StoreWatch.
type StoreWatchOptions struct {
	Logger *slog.Logger
	// Interval between health checks while in-process clients write to
	// the server; zero means 250 ms. With no such write for QuietTicks
	// intervals, the watch checks and then ticks QuietTicks intervals
	// apart until it sees one (pace).
	Interval time.Duration
	// QuietTicks: zero means 20.
	QuietTicks int
	// Pause runs before each restart of the server, and the function it
	// returns after it (also when it failed): a request in flight when the
	// old server goes down is never answered, so whatever recovery waits
	// for should send none meanwhile. It returns when that is so or ctx
	// ends.
	Pause func(context.Context) (resume func())
	// Recovered runs after the server was restarted and is healthy, before
	// the store is reported writable again: what was read from the store
	// while it was failing may have been in its memory only, so its users
	// forget it here. An error keeps the store unwritable and is retried.
	Recovered func(context.Context) error
	// Resumed runs once the store is reported writable again.
	Resumed func()
}

// StoreWatch notices that the server's JetStream store stopped taking
// writes and brings it back, by restarting the embedded server, once the
// disk takes writes again. One
// goroutine (Run) owns the recovery; Writable and Stats may be called from
// any goroutine.
type StoreWatch struct {
	s       *Server
	dir     string // the state dir, which holds the store
	opts    StoreWatchOptions
	suspect chan struct{} // a write failed unexplained (Suspect)

	mu       sync.Mutex
	writable context.Context // done while the store cannot take writes
	cancel   context.CancelCauseFunc
	state    string
	err      error
	since    time.Time
	recovery time.Time
	outage   time.Duration

	failures, recoveries, attempts atomic.Int64
	suspectProbes                  atomic.Int64 // probes suspicions asked for
	checks, ticks                  atomic.Int64 // health checks run; ticks of the interval
}

// WatchStore returns a watch over the server's store; Run runs it. Only a
// workstation's server (Start) can be watched: a hub's store is clustered.
func (s *Server) WatchStore(o StoreWatchOptions) (*StoreWatch, error) {
	if s.opts == nil {
		return nil, errors.New("embedded: watch store: not a workstation's server")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Interval <= 0 {
		o.Interval = watchInterval
	}
	if o.QuietTicks <= 0 {
		o.QuietTicks = quietTicks
	}
	w := &StoreWatch{s: s, dir: s.opts.StoreDir, opts: o, state: StoreOK, suspect: make(chan struct{}, 1)}
	w.writable, w.cancel = context.WithCancelCause(context.Background())
	return w, nil
}

// Writable returns a context that is done, with the store's error as its
// cause, while the store cannot take writes (eventlog.Writable).
func (w *StoreWatch) Writable() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writable
}

// StoreStats is the store's health for status reports.
type StoreStats struct {
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Since is when the current failure was noticed.
	Since time.Time `json:"since,omitzero"`
	// FreeBytes is what the store's file system has left for us.
	FreeBytes int64 `json:"freeBytes"`
	// WriteFailures counts the times the store stopped taking writes,
	// Recoveries the times it was brought back by a restart, and
	// RecoveryAttempts every probe or restart tried meanwhile.
	WriteFailures    int64     `json:"writeFailures"`
	Recoveries       int64     `json:"recoveries"`
	RecoveryAttempts int64     `json:"recoveryAttempts"`
	LastRecovery     time.Time `json:"lastRecovery,omitzero"`
	// LastOutageSeconds is how long the last failure lasted, from the
	// moment it was noticed to the moment the store was writable again.
	LastOutageSeconds float64 `json:"lastOutageSeconds,omitempty"`
	// UsedBytes is what the store holds against its limit, LimitBytes.
	UsedBytes  int64 `json:"usedBytes"`
	LimitBytes int64 `json:"limitBytes"`
}

// Stats returns the store's current health.
func (w *StoreWatch) Stats() StoreStats {
	w.mu.Lock()
	st := StoreStats{
		State: w.state, Since: w.since, LastRecovery: w.recovery, LastOutageSeconds: w.outage.Seconds(),
		WriteFailures: w.failures.Load(), Recoveries: w.recoveries.Load(), RecoveryAttempts: w.attempts.Load(),
	}
	if w.err != nil {
		st.Error = w.err.Error()
	}
	w.mu.Unlock()
	st.FreeBytes, _ = freeBytes(w.dir)
	st.UsedBytes, st.LimitBytes = w.s.storeUse()
	if st.State == StoreOK && atLimit(st.UsedBytes, st.LimitBytes) {
		st.State = StoreAtLimit
		st.Error = fmt.Sprintf("the store holds %d bytes of its limit of %d: every write that would pass it is refused (insufficient resources)", st.UsedBytes, st.LimitBytes)
	}
	return st
}

// atLimit reports whether a store holding used bytes of limit has less
// room left than a largest message (a line's chunk): a line of that size
// would be refused.
func atLimit(used, limit int64) bool {
	return limit > 0 && used+maxPayload > limit
}

// Collectors returns the watch's Prometheus metrics.
func (w *StoreWatch) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Gauge("store_writable", "1 when the JetStream store takes writes, 0 while it fails (a full disk), is being restarted, or holds its limit.",
			metrics.Bool(func() bool { return w.Writable().Err() == nil && !atLimit(w.s.storeUse()) })),
		metrics.Gauge("store_used_bytes", "Bytes the JetStream store holds against its limit (PISYNC_MAX_STORE).", func() int64 {
			used, _ := w.s.storeUse()
			return used
		}),
		metrics.Gauge("store_limit_bytes", "The JetStream store's limit (PISYNC_MAX_STORE).", func() int64 {
			_, limit := w.s.storeUse()
			return limit
		}),
		metrics.Counter("store_write_failures_total", "Times the JetStream store stopped taking writes.", w.failures.Load),
		metrics.Counter("store_recoveries_total", "Times the JetStream store was brought back after a write failure (by restarting the embedded server).", w.recoveries.Load),
		metrics.Gauge("store_free_bytes", "Bytes left on the file system of the JetStream store.", func() int64 {
			n, _ := freeBytes(w.dir)
			return n
		}),
	}
}

// Suspect asks for a check of the store now, the disk's included: a write
// failed and the server gave no reason a health check shows. An atomic
// batch is staged apart from its stream, so a disk too full to stage it
// fails the batch as "incomplete" and leaves every stream healthy; a
// daemon started on a full disk saw nothing else (eventlog.SetSuspect).
// It never blocks; suspicions while a check is due are one.
func (w *StoreWatch) Suspect() {
	select {
	case w.suspect <- struct{}{}:
	default:
	}
}

// Run watches the store until ctx ends. Cancellation is not an error.
func (w *StoreWatch) Run(ctx context.Context) error {
	p := pace{interval: w.opts.Interval, quietTicks: w.opts.QuietTicks}
	tick := time.NewTimer(w.opts.Interval)
	defer tick.Stop()
	var probed time.Time // the last probe a suspicion asked for
	var sent uint64      // the clients' writes as of the last check
	for {
		ticked, suspected := false, false
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			ticked = true
			w.ticks.Add(1)
		case <-w.s.storeHint:
		case <-w.suspect:
			suspected = true
		}
		n := w.s.sent.Load()
		if ticked {
			check, next := p.tick(n != sent)
			tick.Reset(next)
			if !check {
				continue
			}
		}
		sent = n
		w.checks.Add(1)
		err := w.s.storeErr()
		switch {
		case err != nil:
			err = w.withDisk(err)
		case suspected && time.Since(probed) >= suspectEvery:
			// The server is healthy by its own account: only the disk
			// can tell. A probe that fails is the store's failure too.
			probed = time.Now()
			w.suspectProbes.Add(1)
			if err = probe(w.dir); err == nil {
				continue
			}
		default:
			continue
		}
		w.fail(err)
		w.recover(ctx)
		// What was suspected before the recovery is answered by it.
		select {
		case <-w.suspect:
		default:
		}
	}
}

// pace is when the health check runs and when the watch looks next: at
// every tick after one in which a client wrote (the tick's interval), and in
// a quiet stretch only at every quietTicks-th, after which it ticks only that
// often, until a write is seen again. An idle daemon's watch wakes every 5 s
// instead of four times a second: the first write after a quiet stretch is
// seen within 5 s, and a failure the server logs at once (storeHint).
type pace struct {
	interval   time.Duration
	quietTicks int
	quiet      int // ticks since the last one with a write
}

// tick says, at a tick, whether to check and how long until the next one;
// wrote is whether a client wrote since the last check.
func (p *pace) tick(wrote bool) (check bool, next time.Duration) {
	if wrote {
		p.quiet = 0
		return true, p.interval
	}
	if p.quiet++; p.quiet < p.quietTicks {
		return false, p.interval
	}
	return true, time.Duration(p.quietTicks) * p.interval
}

// withDisk names the disk's own error first when a probe write fails too:
// the server's error is often a symptom (a stream whose half-written block
// leaves "expected sequence does not match store"), and the disk is what
// the user can act on.
func (w *StoreWatch) withDisk(err error) error {
	if perr := probe(w.dir); perr != nil {
		return fmt.Errorf("%w (the server: %w)", perr, err)
	}
	return err
}

// fail reports the store unwritable: publishers waiting on it give up, and
// the log says so once.
func (w *StoreWatch) fail(err error) {
	free, _ := freeBytes(w.dir)
	w.mu.Lock()
	w.state, w.err, w.since = StoreFailing, err, time.Now()
	// Counted before publishes are told: a caller that sees its publish
	// fail then reads the failure in Stats (it read 0 once, in CI).
	w.failures.Add(1)
	w.cancel(err)
	w.mu.Unlock()
	w.opts.Logger.Error("the event store cannot write (disk full?); publishing waits, and the embedded server is restarted once the disk takes writes again",
		"err", err, "free_bytes", free, "store", w.dir)
}

// recover waits until the disk takes writes, restarts the server and
// reports the store writable again; it returns when that is done or ctx
// ends. Failed attempts are logged when the reason changes, not each time.
func (w *StoreWatch) recover(ctx context.Context) {
	pause := recoverFirst
	var said string
	attempts := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(pause*2, recoverMost)
		attempts++
		w.attempts.Add(1)
		err := w.tryRecover(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.state, w.err = StoreFailing, err
		w.mu.Unlock()
		if msg := err.Error(); msg != said {
			said = msg
			w.opts.Logger.Warn("the event store still cannot write; retrying", "err", err, "retry_in", pause)
		}
	}
	w.mu.Lock()
	w.state, w.err = StoreOK, nil
	w.recovery, w.outage = time.Now(), time.Since(w.since)
	w.since = time.Time{}
	w.writable, w.cancel = context.WithCancelCause(context.Background())
	outage := w.outage
	w.mu.Unlock()
	w.recoveries.Add(1)
	if w.opts.Resumed != nil {
		w.opts.Resumed()
	}
	w.opts.Logger.Info("the event store takes writes again; embedded server restarted, publishing resumes",
		"outage", outage.Round(time.Millisecond), "attempts", attempts)
}

// tryRecover is one attempt: a probe write, a restart of the server, a
// health check, and the Recovered hook.
func (w *StoreWatch) tryRecover(ctx context.Context) error {
	// An atomic batch the disk filled under while it was stored stays
	// staged (the stream's batches folder) until the server restarts,
	// which writes what the stream lacks of it and then removes it: the
	// restart needs room for the batch as well as for the probe, or the
	// batch is cut short for good. So the restart waits for both, and the
	// error says how much to free (a disk probe, 2026-12-07: "no space
	// left" beside 900 KB free, and 740 KB staged on a 4 MB disk, said
	// nothing of the megabyte and more it waited for).
	staged := stagedBytes(w.dir)
	if err := probe(w.dir); err != nil {
		free, _ := freeBytes(w.dir)
		return needSpace(err, free, staged)
	}
	if staged > 0 {
		// The probe's room is there; the batch's may not be.
		if free, err := freeBytes(w.dir); err == nil && free < probeSize+staged {
			return needSpace(fmt.Errorf("probe: %w", unix.ENOSPC), free, staged)
		}
	}
	w.mu.Lock()
	w.state = StoreRecovering
	w.mu.Unlock()
	if err := w.restart(ctx); err != nil {
		return err
	}
	if err := w.s.storeErr(); err != nil {
		return fmt.Errorf("after restarting the server: %w", err)
	}
	if w.opts.Recovered != nil {
		if err := w.opts.Recovered(ctx); err != nil {
			return fmt.Errorf("after restarting the server: %w", err)
		}
	}
	return nil
}

// restart restarts the server within the Pause hook.
func (w *StoreWatch) restart(ctx context.Context) error {
	if w.opts.Pause != nil {
		resume := w.opts.Pause(ctx)
		defer resume()
	}
	return w.s.restartServer()
}

// storeErr returns why the store cannot take writes, nil when it can. The
// server's health check reports JetStream off and each stream's write
// error; its other findings are not ours to act on (a stream being created
// shows as "could not be recovered" for a moment, say). It checks
// readiness for connections first, with a 1 ms bound that a busy server
// misses now and then; such an answer says nothing of the store, so it is
// asked again a few times.
func (s *Server) storeErr() error {
	for range 20 {
		h := s.nats().Healthz(&server.HealthzOptions{Details: true})
		var errs []error
		answered := true
		for _, e := range h.Errors {
			switch {
			case e.Type == server.HealthzErrorJetStream:
				errs = append(errs, errors.New(e.Error))
			case e.Type == server.HealthzErrorStream && strings.Contains(e.Error, "write error"):
				errs = append(errs, errors.New(e.Error))
			case e.Type == server.HealthzErrorConn:
				answered = false
			}
		}
		if len(errs) > 0 || answered {
			return errors.Join(errs...)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// restartServer shuts the server.Server down, waits for it, and starts a
// new one from the same options: the same store, listener port, leaf
// remote and log. In-process clients reconnect to it by themselves
// (inProcess); the state dir lock, our own, stays held throughout. It
// never runs once Close began, and Close waits for it.
//
// The new server gets readyTimeout to start whatever the watch's context
// says: once the old one is down, Close must find a running one or none,
// never one half started.
func (s *Server) restartServer() error {
	s.restartMu.Lock()
	defer s.restartMu.Unlock()
	if s.closed.Load() {
		return errors.New("server is closed")
	}
	s.setRestarting(true)
	defer s.setRestarting(false)
	if err := shutdown(s.nats()); err != nil {
		return fmt.Errorf("shut the server down: %w", err)
	}
	ns, err := s.launch(context.Background(), freshOptions(s.opts), newNATSLogger(s.logger.log))
	if err != nil {
		err = fmt.Errorf("start a new server: %w", err)
		if ns != nil {
			if serr := shutdown(ns); serr != nil {
				// It may still touch the store: the next attempt
				// and Close wait for it instead.
				s.ns.Store(ns)
				return fmt.Errorf("%w (and %v)", err, serr)
			}
		}
		return err
	}
	s.ns.Store(ns)
	return nil
}

// freshOptions copies o for a new server.Server: a server keeps and
// changes the options it is given (it assigns accounts to the users, for
// one), and Options.Clone shares the leaf remotes.
func freshOptions(o *server.Options) *server.Options {
	c := o.Clone()
	c.LeafNode.Remotes = nil
	for _, r := range o.LeafNode.Remotes {
		rc := *r
		rc.URLs = nil
		for _, u := range r.URLs {
			uc := *u
			rc.URLs = append(rc.URLs, &uc)
		}
		if r.TLSConfig != nil {
			rc.TLSConfig = r.TLSConfig.Clone()
		}
		rc.DenyImports = slices.Clone(r.DenyImports)
		rc.DenyExports = slices.Clone(r.DenyExports)
		c.LeafNode.Remotes = append(c.LeafNode.Remotes, &rc)
	}
	return c
}

// probeFile is written in the state dir, beside the store: a file in the
// store dir itself would read as an account to the health check.
const probeFile = "write-probe"

// probe writes and syncs probeSize bytes in dir and removes them: the disk
// takes the largest write the store makes at once.
func probe(dir string) (err error) {
	path := filepath.Join(dir, probeFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("probe: %w", cerr)
		}
		if rerr := os.Remove(path); err == nil && rerr != nil {
			err = fmt.Errorf("probe: %w", rerr)
		}
	}()
	if _, err := f.Write(make([]byte, probeSize)); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}

// needSpace says, with the probe's error, how much the disk must free:
// "no space left on device" beside a status of 900 KB free said nothing
// of the megabyte a probe needs.
func needSpace(err error, free, staged int64) error {
	if !errors.Is(err, unix.ENOSPC) && !errors.Is(err, unix.EDQUOT) {
		return err
	}
	need := int64(probeSize) + staged
	var held string
	if staged > 0 {
		held = fmt.Sprintf(", and the %d bytes of a batch it began to store, which the restart finishes", staged)
	}
	return fmt.Errorf("%w: %d bytes free, and the store is restarted once %d are (room for its largest message%s): free %d more",
		err, free, need, held, need-free)
}

// stagedBytes is what the store's staged atomic batches take on disk
// (jetstream/ACCOUNT/streams/STREAM/batches under dir): nats-server
// writes the rest of a batch cut short when it starts the stream, then
// removes the folder.
func stagedBytes(dir string) int64 {
	dirs, _ := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", "*", "batches"))
	var n int64
	for _, d := range dirs {
		filepath.WalkDir(d, func(_ string, de fs.DirEntry, err error) error {
			if err == nil && de.Type().IsRegular() {
				if fi, err := de.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
	}
	return n
}

// freeBytes is what dir's file system has left for an unprivileged user.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
