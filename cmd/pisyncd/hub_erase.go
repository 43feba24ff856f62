package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/fsutil"
	"github.com/pisyncd/pisyncd/internal/redact"
)

// A running hub node answers `pisyncd hub erase`, `usage`, `upgrade` and
// `reload` (also `add-node`'s and `remove-node`'s) on a control socket in
// its state dir (0600, like a workstation's): it holds the in-process
// administration user of every team's account, which nothing outside the
// process can use.

// hubEraseResult is one team's part of `pisyncd hub erase`.
type hubEraseResult struct {
	Team string `json:"team"`
	eventlog.HubErased
	Error string `json:"error,omitempty"`
}

// hubControl serves the hub's control socket until stop.
func hubControl(h *embedded.Server, cfg *config.Hub, logger *slog.Logger) (stop func(), err error) {
	ln, err := listenControl(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /erase", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		sid, node, team, force := q.Get("session"), q.Get("node"), q.Get("team"), q.Get("force") == "1"
		if (sid == "") == (node == "") {
			http.Error(w, "erase: name a session or a node", http.StatusBadRequest)
			return
		}
		ctx := context.WithoutCancel(r.Context())
		// A node's erase may take minutes: asked for, its count so far
		// goes to the caller as it goes, a line of JSON each, before the
		// results (hubEraseStream).
		streamed := node != "" && q.Get("progress") == "1"
		if streamed {
			w.Header().Set("Content-Type", "application/x-ndjson")
		}
		var out []hubEraseResult
		for _, t := range namedTeams(h, team) {
			res := hubEraseResult{Team: t}
			progress := eraseProgress(logger, node, t)
			if streamed {
				progress = streamProgress(w, t, progress)
			}
			err := withTeam(h, t, func(nc *nats.Conn) (err error) {
				res.HubErased, err = hubErase(ctx, nc, sid, node, force, progress)
				return err
			})
			switch {
			case err != nil:
				res.Error = err.Error()
			case node != "" && !res.Found:
				// not this team's node: nothing erased, nothing to log
			case node != "":
				logger.Info("a node's lines erased on the hub", "node", node, "team", t, "messages", res.Messages)
			default:
				logger.Info("session erased on the hub", "session", sid, "team", t, "messages", res.Messages, "before_seq", res.Before, "key_messages_tombstoned", res.KeySubjects)
			}
			out = append(out, res)
		}
		if len(out) == 0 {
			http.Error(w, noTeam(h, "erase", team), http.StatusNotFound)
			return
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("GET /usage", serveHubUsage(h))
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		if err := reloadHub(context.WithoutCancel(r.Context()), h, cfg, logger); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var nodes []string
		for _, n := range h.Nodes() {
			nodes = append(nodes, n.Name)
		}
		writeJSON(w, reloadAnswer{Teams: h.Teams(), Nodes: nodes, TLSCert: cfg.TLSCert, LeafListen: cfg.LeafListen})
	})
	mux.HandleFunc("POST /upgrade", func(w http.ResponseWriter, r *http.Request) {
		teams, err := upgradeTeams(context.WithoutCancel(r.Context()), h, cfg, logger)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, upgradeAnswer{Upgraded: len(teams) > 0, Teams: teams})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("control socket", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}

// hubErase erases a session (or, with node set, every line of a node,
// reporting to progress) from PI_HUB in the account nc is connected to.
func hubErase(ctx context.Context, nc *nats.Conn, sid, node string, force bool, progress func(int)) (eventlog.HubErased, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return eventlog.HubErased{}, err
	}
	if node != "" {
		return eventlog.EraseHubNode(ctx, js, node, progress)
	}
	return eventlog.EraseHub(ctx, js, sid, force)
}

const hubEraseUsage = "pisyncd hub erase (SESSION-ID [--force] | --node NODE) [--team T] [--json] [--server URL (--user U --password-file F | --creds FILE) [--ca FILE]]"

// hubEraseCommand erases a session from the hub: from a running `pisyncd
// hub` node on this machine (its control socket), or from any hub through
// its client listener as an administration user (--server: a stock
// nats-server, say).
func hubEraseCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("hub erase", flag.ContinueOnError)
	team := fs.String("team", "", "only this team's account (default: every team)")
	force := fs.Bool("force", false, "erase even without an erase event from a workstation")
	node := fs.String("node", "", "erase every line this node published (after removing it from the hub: one that filled its team's share)")
	asJSON := fs.Bool("json", false, "print JSON")
	admin := addAdminFlags(fs, "erase")
	if err := parseArgs(fs, reorder(args, append([]string{"node", "team"}, adminValued...)...), hubEraseUsage, -1); err != nil {
		return err
	}
	if err := admin.check(hubEraseUsage); err != nil {
		return err
	}
	switch {
	case *node != "" && (fs.NArg() > 0 || *force):
		return &usageError{Msg: "hub erase: --node erases a node's lines: no SESSION-ID, no --force", Usage: hubEraseUsage}
	case *node == "" && fs.NArg() != 1:
		return &usageError{Msg: "hub erase: name one SESSION-ID, or a node with --node", Usage: hubEraseUsage}
	case *node == "" && fs.Arg(0) == "":
		return &usageError{Msg: "hub erase: empty SESSION-ID", Usage: hubEraseUsage}
	}
	sid := fs.Arg(0)
	what := sid // as errors name it
	if *node != "" {
		what = "--node " + *node
	}
	ctx, stop := signalContext(io.Discard)
	defer stop()
	var out []hubEraseResult
	if *admin.server != "" {
		nc, err := admin.connect("pisyncd hub erase")
		if err != nil {
			return fmt.Errorf("hub erase: %w", err)
		}
		defer nc.Close()
		res := hubEraseResult{Team: *team}
		var progress func(int)
		if *node != "" && !*asJSON {
			progress = sentEvery(eraseProgressSent, func(n int) { printErasedSoFar(stdout, *node, erasedSoFar{Team: *team, Erased: n}) })
		}
		if res.HubErased, err = hubErase(ctx, nc, sid, *node, *force, progress); err != nil {
			return hubEraseError(what, err)
		}
		out = append(out, res)
	} else {
		cfg, err := config.LoadHub()
		if err != nil {
			return err
		}
		q := url.Values{"session": {sid}}
		if *node != "" {
			q = url.Values{"node": {*node}}
		}
		if *team != "" {
			q.Set("team", *team)
		}
		if *force {
			q.Set("force", "1")
		}
		if *node != "" {
			if out, err = hubEraseStream(ctx, cfg, q, func(p erasedSoFar) {
				if !*asJSON {
					printErasedSoFar(stdout, *node, p)
				}
			}); err != nil {
				return err
			}
		} else if err := postHub(ctx, cfg, "/erase?"+q.Encode(), &out); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	var errs []error
	found := false
	for _, r := range out {
		name := r.Team
		if name == "" {
			name = "(the account)"
		}
		found = found || r.Found
		switch {
		case r.Error != "":
			errs = append(errs, fmt.Errorf("team %s: %s", name, r.Error))
		case *asJSON:
		case !r.Found && *node != "":
			fmt.Fprintf(stdout, "team %s: nothing of node %s\n", name, *node)
		case !r.Found:
			fmt.Fprintf(stdout, "team %s: nothing of session %s\n", name, sid)
		case *node != "":
			fmt.Fprintf(stdout, "team %s: erased %d message(s) of node %s; its erase events and key messages kept\n", name, r.Messages, *node)
		default:
			fmt.Fprintf(stdout, "team %s: erased %d message(s) of session %s before the erase event (seq %d); erase events kept; %d key message(s) tombstoned\n", name, r.Messages, sid, r.Before, r.KeySubjects)
		}
	}
	if len(errs) > 0 {
		return hubEraseError(what, errors.Join(errs...))
	}
	if !found && *node != "" {
		return fmt.Errorf("hub erase %s: no message of the node on this hub", what)
	}
	if !found {
		// A sealed session's lines are under its token, which only a
		// holder of the team key computes.
		return fmt.Errorf("hub erase %s: no message of the session on this hub (if its team encrypts, its lines are under its token: pisyncd key token %s on a workstation prints what to give hub erase)", sid, sid)
	}
	return nil
}

// hubEraseError adds what to do to the errors an operator can fix (they
// may come back through the control socket as text).
func hubEraseError(sid string, err error) error {
	switch {
	case errors.Is(err, eventlog.ErrNoEraseEvent) || strings.Contains(err.Error(), eventlog.ErrNoEraseEvent.Error()):
		return fmt.Errorf("hub erase %s: %w: run `pisyncd erase %s` on a workstation that wrote it first (or --force)", sid, err, sid)
	case errors.Is(err, eventlog.ErrDeleteDenied) || strings.Contains(err.Error(), eventlog.ErrDeleteDenied.Error()):
		return fmt.Errorf("hub erase %s: %w: run `pisyncd hub upgrade` on one hub node", sid, err)
	}
	return fmt.Errorf("hub erase %s: %w", sid, err)
}

// hubUpgradeCommand asks the running hub node to upgrade PI_HUB (needed
// once, on one node of a cluster, for a PI_HUB made by an older pisyncd).
func hubUpgradeCommand(args []string, stdout io.Writer) error {
	if wantsHelp(args) {
		return &helpRequest{Usage: "pisyncd hub upgrade"}
	}
	if len(args) > 0 {
		return &usageError{Msg: fmt.Sprintf("hub upgrade takes no arguments, got %q", args), Usage: "pisyncd hub upgrade"}
	}
	cfg, err := config.LoadHub()
	if err != nil {
		return err
	}
	ctx, stop := signalContext(io.Discard)
	defer stop()
	var a upgradeAnswer
	if err := postHub(ctx, cfg, "/upgrade", &a); err != nil {
		return err
	}
	if !a.Upgraded {
		// Before, this said "upgraded" whatever the hub did.
		_, err = fmt.Fprintln(stdout, "PI_HUB is up to date in every team's account: nothing to upgrade; hub erase can delete messages")
		return err
	}
	_, err = fmt.Fprintf(stdout, "PI_HUB upgraded in the account of %s: hub erase can delete messages now\n", teamList(a.Teams))
	return err
}

// upgradeAnswer is the hub node's answer to an upgrade: whether any team's
// PI_HUB was upgraded, and which.
type upgradeAnswer struct {
	Upgraded bool     `json:"upgraded"`
	Teams    []string `json:"teams,omitempty"`
}

// teamList names teams for a sentence: the global account's is "".
func teamList(teams []string) string {
	names := make([]string, len(teams))
	for i, t := range teams {
		if t == "" {
			names[i] = "the hub's own (no team)"
		} else {
			names[i] = "team " + strconv.Quote(t)
		}
	}
	return strings.Join(names, ", ")
}

// postHub sends a request to the running hub node's control socket and
// decodes its JSON answer into v (unless nil).
func postHub(ctx context.Context, cfg *config.Hub, path string, v any) error {
	return callHub(ctx, cfg, http.MethodPost, path, v)
}

// clusterSilence is what a hub that answers nothing most often means, as
// hub usage, hub erase and a workstation's hint say it.
const clusterSilence = "a cluster that has just lost a node elects new leaders within seconds, and without two of three nodes running nothing answers (the hub's log says NO quorum)"

// errNoHubHere: no hub node answers on the control socket of the state
// dir the settings name.
var errNoHubHere = errors.New("no hub node runs here")

// callHub asks the hub node running here (its control socket) and decodes
// its JSON answer into v.
func callHub(ctx context.Context, cfg *config.Hub, method, path string, v any) error {
	resp, err := doHub(ctx, cfg, method, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// doHub sends a request to the hub node running here and returns its
// answer, a success: anything else is an error with the hub's words.
func doHub(ctx context.Context, cfg *config.Hub, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://pisyncd-hub"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := controlClient(cfg.StateDir).Do(req)
	if op := (*net.OpError)(nil); err != nil && !(errors.As(err, &op) && op.Op == "dial") {
		// It answers on its socket, and not to this: an interrupted
		// command read "no hub node runs here" beside a running one.
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("hub: the hub node running here did not answer in time (%w): %s; try again once they run", err, clusterSilence)
		}
		return nil, fmt.Errorf("hub: the hub node running here did not answer: %w", err)
	}
	if err != nil {
		if hint := serviceStateDirHint(cfg); hint != "" {
			return nil, fmt.Errorf("%w (no answer on %s): %s", errNoHubHere, filepath.Join(cfg.StateDir, config.ControlSocket), hint)
		}
		return nil, fmt.Errorf("%w (no answer on %s): set PISYNC_HUB_STATE_DIR to the running hub node's state dir (hub usage and hub erase also reach a hub through --server)", errNoHubHere, filepath.Join(cfg.StateDir, config.ControlSocket))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		// The hub node's message alone: "404 Not Found" in front of it
		// meant nothing to the operator who typed the command.
		return nil, fmt.Errorf("hub: %s", cmp.Or(strings.TrimSpace(string(b)), resp.Status))
	}
	return resp, nil
}

// adminFlags reach any hub through its client listener as an
// administration user (--server): a stock nats-server, say, which has no
// pisyncd control socket.
type adminFlags struct{ server, user, password, passwordFile, creds, ca *string }

// adminValued are adminFlags' names, which take a value (reorder).
var adminValued = []string{"server", "user", "password", "password-file", "creds", "ca"}

// addAdminFlags defines adminFlags on fs for a command that does what.
func addAdminFlags(fs *flag.FlagSet, what string) adminFlags {
	return adminFlags{
		server:   fs.String("server", "", "the hub's client URL, to "+what+" as an administration user"),
		user:     fs.String("user", "", "administration user (with --server)"),
		password: fs.String("password", "", "its password (every local user reads a command's arguments, in ps: prefer --password-file)"),
		// A command's arguments are in /proc/PID/cmdline, which every
		// user of the machine reads: the password in a file is not.
		passwordFile: fs.String("password-file", "", "a file holding its password (its first line)"),
		creds:        fs.String("creds", "", "administration credentials file (with --server)"),
		ca:           fs.String("ca", "", "CA of the hub's certificate (with --server and tls://)"),
	}
}

// connect dials --server as the administration user, naming the
// connection name.
func (a adminFlags) connect(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name)}
	password := *a.password
	if *a.passwordFile != "" {
		if password != "" {
			return nil, errors.New("--password and --password-file: give one")
		}
		b, err := fsutil.ReadSetting(*a.passwordFile, fsutil.SettingMax)
		if err != nil {
			return nil, fmt.Errorf("--password-file: %w", err)
		}
		password, _, _ = strings.Cut(string(b), "\n")
		password = strings.TrimSuffix(password, "\r")
	}
	if *a.user != "" {
		opts = append(opts, nats.UserInfo(*a.user, password))
	}
	if *a.creds != "" {
		opts = append(opts, nats.UserCredentials(*a.creds))
	}
	if *a.ca != "" {
		opts = append(opts, nats.RootCAs(*a.ca))
	}
	nc, err := nats.Connect(*a.server, opts...)
	if err != nil {
		// nats.go's words alone ("nats: Authorization Violation")
		// named neither the hub nor what to change.
		return nil, fmt.Errorf("%s: %w%s", redact.URL(*a.server), err, connectHint(err))
	}
	return nc, nil
}

// check refuses --server without credentials before anything is dialled:
// a hub takes an administration user only.
func (a adminFlags) check(usage string) error {
	if *a.server != "" && *a.user == "" && *a.creds == "" {
		return &usageError{Msg: "--server needs an administration user: --user U with --password-file F, or --creds FILE (docs/HUB.md)", Usage: usage}
	}
	return nil
}

// connectHint is what to check after a failed connection to a hub.
func connectHint(err error) string {
	switch msg := err.Error(); {
	case strings.Contains(msg, "Authorization Violation"):
		return ": the hub refuses this user and password (or credentials): check --user and --password-file, or --creds, against the team's administration users (docs/HUB.md)"
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return ": pass the CA that signed the hub's certificate with --ca FILE (the hub's ca.pem)"
	case strings.Contains(msg, "no servers available"):
		return ": nothing answers there: check the URL, and that the hub's client listener (PISYNC_HUB_CLIENT_LISTEN) is on and reachable from here"
	}
	return ""
}

// eraseProgressSent is how often a node's erase sends its count so far to
// the command that asked for it (a variable: tests send every count).
var eraseProgressSent = time.Second

// erasedSoFar is a line of a streamed node erase before its results.
type erasedSoFar struct {
	Team   string `json:"team"`
	Erased int    `json:"erased"`
}

// streamProgress sends team's count so far to w, a line of JSON at most
// every eraseProgressSent, and passes every count on to next.
func streamProgress(w http.ResponseWriter, team string, next func(int)) func(int) {
	rc := http.NewResponseController(w)
	send := sentEvery(eraseProgressSent, func(n int) {
		b, _ := json.Marshal(erasedSoFar{Team: team, Erased: n})
		w.Write(append(b, '\n'))
		rc.Flush() // a caller gone is not the erase's concern
	})
	return func(n int) {
		next(n)
		send(n)
	}
}

// sentEvery passes a count on to send at most once every d.
func sentEvery(d time.Duration, send func(int)) func(int) {
	var last time.Time
	return func(n int) {
		if time.Since(last) >= d {
			last = time.Now()
			send(n)
		}
	}
}

// printErasedSoFar is a node erase's count so far, as the command prints it.
func printErasedSoFar(w io.Writer, node string, p erasedSoFar) {
	team := p.Team
	if team == "" {
		team = "(the account)"
	}
	fmt.Fprintf(w, "team %s: %d message(s) of node %s erased so far\n", team, p.Erased, node)
}

// hubEraseStream asks the hub node running here to erase a node's lines
// (q), passing each count so far to report, and returns the results.
func hubEraseStream(ctx context.Context, cfg *config.Hub, q url.Values, report func(erasedSoFar)) ([]hubEraseResult, error) {
	q.Set("progress", "1")
	resp, err := doHub(ctx, cfg, http.MethodPost, "/erase?"+q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var line json.RawMessage
		if err := dec.Decode(&line); err != nil {
			return nil, fmt.Errorf("hub erase: the hub's answer: %w", err)
		}
		if len(line) > 0 && line[0] == '[' {
			var out []hubEraseResult
			return out, json.Unmarshal(line, &out)
		}
		var p erasedSoFar
		if err := json.Unmarshal(line, &p); err != nil {
			return nil, fmt.Errorf("hub erase: the hub's answer: %w", err)
		}
		report(p)
	}
}

// eraseProgress logs, every eraseProgressEvery, how many of a node's lines
// the hub has erased so far: thousands take minutes.
func eraseProgress(logger *slog.Logger, node, team string) func(int) {
	return everyFew(func(n int, _ time.Duration) {
		logger.Info("erasing a node's lines on the hub", "node", node, "team", team, "erased", n)
	})
}

// everyFew returns a progress callback of an erase that passes the count
// so far, and the time since it began, to say at most every
// eraseProgressEvery: a secure delete rewrites its message's block, and
// a long erase takes minutes.
func everyFew(say func(n int, took time.Duration)) func(int) {
	start := time.Now()
	last := start
	return func(n int) {
		if time.Since(last) >= eraseProgressEvery {
			last = time.Now()
			say(n, last.Sub(start))
		}
	}
}

const eraseProgressEvery = 5 * time.Second
