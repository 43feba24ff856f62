package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/redact"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/replicate"
	"github.com/pisyncd/pisyncd/search"
	"github.com/pisyncd/pisyncd/watch"
	"github.com/pisyncd/pisyncd/web"
)

// listenControl listens on the daemon's local control endpoint in the
// state dir (config.ControlSocket): a Unix socket, so `pisyncd status`
// works without any network listener, and only the owner can connect (the
// state dir is 0700, the socket 0600).
func listenControl(stateDir string) (net.Listener, error) {
	path := filepath.Join(stateDir, config.ControlSocket)
	// The state dir lock is held, so a socket file left here is stale.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return web.LimitListener(ln, maxControlConns, 0, controlStall), nil
}

// controlStall and webStall bound how long an answer's write waits for its
// client to read (web.LimitListener): an answer holds what it is read from
// until it is written. A command's output piped into a pager that is not
// read on (`pisyncd events SID | less`) is cut after two minutes; a
// browser reads at once.
const (
	controlStall = 2 * time.Minute
	webStall     = 30 * time.Second
)

// maxControlConns bounds the control socket's open connections, as
// maxHTTPConns bounds the web port's: each is a file descriptor the tailer
// and the store need too, and a program holding 20,000 of them (reopened
// as the header timeout closed them) made the daemon run out, a new line
// take 5.4 s to be published and status fail (a probe on 2026-12-06).
// Past it a new connection waits to be accepted. Only the daemon's user
// reaches the socket (0600), so none is reserved.
const maxControlConns = 256

// maxEventReads bounds the `pisyncd events` answers read at once; more
// wait for one to end. Each reads its session through a buffer of up to
// 8 MiB, and 190 readers that did not read on held 1.2 GB (a probe,
// 2026-12-07).
const maxEventReads = 8

// maxTails bounds the `pisyncd tail` streams open at once, below
// maxControlConns: each holds its connection for as long as it follows,
// and 256 of them kept every other command (status, ls, a 257th tail)
// waiting to be accepted until its deadline, which then said the daemon
// was stuck (a probe, 2026-12-07). One past it is refused at once, saying
// why.
const maxTails = 192

// limitTails serves at most n tails (h) at once; one more is refused with
// 503 and the bound.
func limitTails(h http.Handler, n int) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			h.ServeHTTP(rw, r)
		default:
			http.Error(rw, fmt.Sprintf("%d tails are open already, the most the daemon serves at once (each holds a connection of the control socket, which the other commands need too): end one first", n), http.StatusServiceUnavailable)
		}
	})
}

// Status is what `pisyncd status` reports.
type Status struct {
	Build       BuildInfo     `json:"build"`
	Node        string        `json:"node"`
	PID         int           `json:"pid"`
	Started     time.Time     `json:"started"`
	SessionsDir string        `json:"sessionsDir"`
	StateDir    string        `json:"stateDir"`
	NATSURL     string        `json:"natsUrl,omitempty"`
	Tailer      watch.Stats   `json:"tailer"`
	Stream      eventlog.Info `json:"stream"`
	// StreamError is why Stream could not be read (the store is being
	// restarted after a write error, say): status answers anyway.
	StreamError string `json:"streamError,omitempty"`
	// WaitingForHub says the session files are not read yet: this state
	// dir has published nothing, the sessions dir holds files from before
	// it, and its first copy from the hub has not completed
	// (waitFirstCopy).
	WaitingForHub bool `json:"waitingForHub,omitempty"`
	// Store is the event store's health: whether it takes writes (a full
	// disk under the state dir stops it), its free space, and how often it
	// failed and was brought back (by restarting the embedded server).
	Store *embedded.StoreStats `json:"store,omitempty"`
	// StoreCipher is the cipher the store is encrypted with at rest
	// (PISYNC_STORE_CIPHER), "off" when it is in clear. Never the key.
	StoreCipher string `json:"storeCipher"`
	// FilesRetrying counts session files whose last publish failed and
	// that wait for their next attempt.
	FilesRetrying        int64 `json:"filesRetrying"`
	SessionsDirFreeBytes int64 `json:"sessionsDirFreeBytes"`
	// With a hub:
	HubURLs []string `json:"hubUrls,omitempty"`
	// HubLinked: the embedded server's link to the hub (a leaf
	// connection) is up; it dials again every 1-2 s while it is not.
	HubLinked *bool `json:"hubLinked,omitempty"`
	// HubPeer is the hub node the link is made to: "NAME at HOST:PORT".
	HubPeer string `json:"hubPeer,omitempty"`
	// HubLinkCause is, while the link is down, the cause the log's last
	// hint named (within the last minutes), "" when none did.
	HubLinkCause string                    `json:"hubLinkCause,omitempty"`
	Forwarder    *eventlog.ForwarderStats  `json:"forwarder,omitempty"`
	Downloader   *eventlog.DownloaderStats `json:"downloader,omitempty"`
	Replicator   *replicate.Stats          `json:"replicator,omitempty"`
	Admission    *admit.Stats              `json:"admission,omitempty"`
	Encryption   *encryptionStatus         `json:"encryption,omitempty"`
	Projection   projection.Stats          `json:"projection"`
	// Listener is the local listener's read relay, with PISYNC_LISTEN.
	Listener       *embedded.ReadRelayStats `json:"listener,omitempty"`
	Search         *search.Stats            `json:"search,omitempty"`
	ForkedSessions []string                 `json:"forkedSessions,omitempty"`
	// Erased counts the sessions erased here at the user's request
	// (pisyncd erase); those erased for other machines are the
	// replicator's sessionsErased.
	Erased int64 `json:"sessionsErased"`

	// MemoryBudget is PISYNC_MEMORY_BUDGET in force, the bound on the
	// daemon's peak resident set; GoMemoryLimit the Go runtime's soft
	// limit (the budget less 160 MiB, or GOMEMLIMIT).
	MemoryBudget  int64      `json:"memoryBudget"`
	GoMemoryLimit int64      `json:"goMemoryLimit"`
	Heap          heapStatus `json:"heap"`
}

// streamInfoTimeout bounds the stream's part of a status: while the store
// is restarted after a write error the request may wait, and status must
// answer anyway.
const streamInfoTimeout = time.Second

// unsent is how many messages PI_LOCAL holds after through, the
// forwarder's position, of info, its state; -1 when infoErr says the store
// did not answer. It was 0 then, which says everything written here is on
// the hub, so the machine may go offline (a probe under a load of 8 saw 0
// with 90,000 lines unsent: the stream's info is asked within
// streamInfoTimeout).
func (d *Daemon) unsent(ctx context.Context, info eventlog.Info, infoErr error, through uint64) int64 {
	switch {
	case infoErr != nil:
		return -1
	case info.LastSeq <= through:
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, streamInfoTimeout)
	defer cancel()
	if n, err := d.log.After(ctx, through, info); err == nil {
		return int64(n)
	}
	return int64(info.LastSeq - through) // at most
}

func (d *Daemon) status(ctx context.Context) (Status, error) {
	ictx, cancel := context.WithTimeout(ctx, streamInfoTimeout)
	info, err := d.log.Info(ictx)
	cancel()
	st := Status{
		Build: readBuildInfo(), Node: d.cfg.NodeID, PID: os.Getpid(), Started: d.started,
		SessionsDir: d.cfg.SessionsDir, StateDir: d.cfg.StateDir, NATSURL: d.srv.ClientURL(),
		Stream: info, StoreCipher: d.srv.StoreCipher(), Erased: d.erased.Load(), SessionsDirFreeBytes: freeBytes(d.cfg.SessionsDir),
		MemoryBudget: int64(config.BudgetOrDefault(d.cfg.MemoryBudget)), GoMemoryLimit: debug.SetMemoryLimit(-1),
		Heap: readHeapStatus(),
	}
	if err != nil {
		st.StreamError = err.Error()
	}
	st.WaitingForHub = d.waitingForHub.Load()
	if d.store != nil {
		ss := d.store.Stats()
		st.Store = &ss
	}
	if d.relay != nil {
		rs := d.relay.Stats()
		st.Listener = &rs
	}
	if d.tailer != nil {
		st.Tailer = d.tailer.Stats()
		st.FilesRetrying = d.tailer.Retrying()
	}
	if d.proj != nil {
		st.Projection = d.proj.Stats()
	}
	if d.searchW != nil {
		ss := d.searchW.Stats()
		// What search answers with: before the index follows its
		// streams (until the first read is projected), Stats' lag is 0,
		// and status said "up to date" while search said lines were
		// missing (a probe).
		ictx, cancel := context.WithTimeout(ctx, streamInfoTimeout)
		if n, uerr := d.searchW.Unindexed(ictx); uerr == nil {
			ss.Lag = n
		}
		cancel()
		st.Search = &ss
	}
	if d.fwd != nil {
		fs, ds, rs := d.fwd.Stats(), d.dl.Stats(), d.repl.Stats()
		fs.Unsent = d.unsent(ctx, info, err, fs.Through)
		st.HubURLs, st.Forwarder, st.Downloader, st.Replicator = redact.URLs(d.cfg.HubURLs), &fs, &ds, &rs
		linked := d.srv.HubLinked()
		st.HubLinked, st.HubPeer = &linked, d.srv.HubPeer()
		if !linked && d.hints != nil {
			st.HubLinkCause = d.hints.recent(time.Now())
		}
		st.ForkedSessions = d.repl.ForkedSessions()
		as := d.gate.Stats()
		st.Admission = &as
		st.Encryption = &encryptionStatus{Mode: cmp.Or(d.cfg.Encrypt, "auto"), CryptStatus: d.crypt.Status()}
	}
	return st, err
}

func (d *Daemon) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		// A stream that cannot be read is reported in the status itself
		// (StreamError): status must answer most when something is wrong.
		st, _ := d.status(r.Context())
		writeJSON(w, st)
	})
	reads := make(chan struct{}, maxEventReads)
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		sid := r.URL.Query().Get("session")
		if err := eventlog.CheckSID(sid); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest) // no subject is built from it
			return
		}
		select {
		case reads <- struct{}{}:
			defer func() { <-reads }()
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		withData := r.URL.Query().Get("entries") != "no"
		err := d.scanEvents(r.Context(), sid, withData, func(ev *eventlog.Event) error {
			return enc.Encode(newEventJSON(ev))
		})
		if err != nil {
			// Headers are gone already; an error object ends the stream.
			enc.Encode(map[string]string{"error": err.Error()})
		}
	})
	mux.HandleFunc("GET /healthz", d.healthz)
	mux.HandleFunc("GET /web", d.serveWebURL)
	mux.HandleFunc("POST /erase", d.serveErase)
	ph := d.proj.Handler()
	mux.Handle("GET /ls", ph)
	mux.Handle("GET /context", d.fg.Handler(ph))
	mux.Handle("GET /tail", limitTails(ph, maxTails))
	mux.Handle("GET /api/search", d.SearchHandler())
	return mux
}

func (d *Daemon) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	// The web view: every other path. Its session pages read a whole
	// session: foreground work, as a context is (not the event streams,
	// which stay open).
	mux.Handle("/", d.web)
	mux.Handle("GET /s/", d.fg.Handler(d.web))
	mux.Handle("GET /api/s/", d.fg.Handler(d.web))
	// Everything but /healthz, which says only whether the daemon is up
	// (a container's probe asks under any Host), goes through the view's
	// guard, its Host check and its token (a scraper of /metrics sends it
	// as a bearer token), before the mux: the mux's own answers, such as
	// its redirect of "//x" or "/s", are the guard's too. The view's paths
	// pass its guard twice, which costs a few comparisons.
	guarded := d.web.Guard(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// HEAD too: a probe that asks for the status line alone got 401.
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			d.healthzTerse(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// healthz answers a probe on the control socket: ok, or 503 and why.
func (d *Daemon) healthz(w http.ResponseWriter, r *http.Request) {
	answerHealth(w, d.unhealthy(), true)
}

// healthzTerse answers a probe on the HTTP listener, which every local user
// reaches without the token, with its status and not why: the store's
// error names files of the state dir, the server's its cause. The control
// socket's /healthz and status say why.
func (d *Daemon) healthzTerse(w http.ResponseWriter, r *http.Request) {
	answerHealth(w, d.unhealthy(), false)
}

// answerHealth writes ok, or 503 with reason when why is set.
func answerHealth(w http.ResponseWriter, reason string, why bool) {
	// A probe asks once: its connection is not kept (any local user can
	// ask, and a kept connection holds one of the daemon's descriptors).
	w.Header().Set("Connection", "close")
	switch {
	case reason == "":
		fmt.Fprintln(w, "ok")
	case why:
		http.Error(w, reason, http.StatusServiceUnavailable)
	default:
		http.Error(w, "unavailable: pisyncd status says why", http.StatusServiceUnavailable)
	}
}

// unhealthy says why the daemon cannot do its work, "" when it can.
func (d *Daemon) unhealthy() string {
	if !d.nc.IsConnected() {
		return "nats connection down"
	}
	if err := d.srv.Err(); err != nil {
		return "embedded server failed: " + err.Error()
	}
	if d.tailer != nil && d.tailer.SessionsDirAway() {
		// Nothing is followed meanwhile: a probe that says ok hid a
		// daemon watching nothing (an operations probe on 2026-12-07).
		return "sessions dir " + d.cfg.SessionsDir + " is away (gone, or emptied of the session files it held: unmounted, moved): nothing is followed until it is back"
	}
	if d.store != nil {
		switch st := d.store.Stats(); st.State {
		case embedded.StoreOK:
		case embedded.StoreAtLimit:
			return "event store " + atLimitNote(st)
		default:
			return fmt.Sprintf("event store %s since %s: %s", st.State, st.Since.Format(time.RFC3339), st.Error)
		}
	}
	return ""
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// controlClient talks to a running daemon over its control socket.
func controlClient(stateDir string) *http.Client { return controlClientWithin(stateDir, 0) }

// controlClientWithin is controlClient giving up on an answer whose first
// byte takes longer than answerWithin (0: no bound).
func controlClientWithin(stateDir string, answerWithin time.Duration) *http.Client {
	path := filepath.Join(stateDir, config.ControlSocket)
	return &http.Client{
		Timeout: 0,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			ResponseHeaderTimeout: answerWithin,
			// Each client is made for a command or two, and a connection
			// kept for a next request that never comes held one of the
			// socket's maxControlConns until the server's idle timeout:
			// a caller that made a client per request (a test polling
			// status) took every one of them within seconds.
			DisableKeepAlives: true,
		},
	}
}

// encryptionStatus is the end-to-end encryption part of status.
type encryptionStatus struct {
	Mode string `json:"mode"` // PISYNC_ENCRYPT
	eventlog.CryptStatus
}
