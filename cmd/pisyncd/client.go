package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/watch"
)

// What the inspection commands (status, events, ls, context, tail) share:
// talking to the running daemon over its control socket, and falling back
// to the store itself when no daemon runs.

// errNotRunning: the control socket does not answer.
var errNotRunning = errors.New("pisyncd is not running")

// errStarting: a daemon holds the state dir but its control socket is not
// open yet.
var errStarting = errors.New("pisyncd is starting")

// errNoStore: no daemon has ever run with this state dir, so there is
// nothing to read; the inspection commands say so rather than create an
// empty store (and a node id) on a machine that never ran the daemon.
var errNoStore = errors.New("pisyncd has not run here yet")

// daemonError is the daemon's answer to a request it could not serve. Its
// text is the daemon's message alone: HTTP's status line means nothing to
// the person who typed the command.
type daemonError struct {
	status int
	msg    string
}

func (e *daemonError) Error() string { return e.msg }

// notFound reports whether err is the daemon saying it has no such thing.
func notFound(err error) bool {
	var de *daemonError
	return errors.As(err, &de) && de.status == http.StatusNotFound
}

func getControl(ctx context.Context, cfg *config.Config, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://pisyncd"+path, nil)
	if err != nil {
		return nil, err
	}
	// A daemon that takes the connection and sends nothing is stuck: the
	// commands that read (events, context, ls, tail, search) say so rather
	// than wait out their own long deadline. Erase, which waits for its
	// work, does not come here.
	resp, err := controlClientWithin(cfg.StateDir, answerTimeout).Do(req)
	if err != nil {
		return nil, noAnswer(ctx, cfg, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		msg := strings.TrimSpace(string(b))
		if msg == "" {
			msg = resp.Status
		}
		return nil, &daemonError{status: resp.StatusCode, msg: msg}
	}
	return resp, nil
}

// noAnswer is the error of a request to the control socket that got no
// answer: errNotRunning when nothing listens there (the callers that can
// then read the store do), else what went wrong: a daemon that is up but
// did not answer in time is not "not running".
func noAnswer(ctx context.Context, cfg *config.Config, err error) error {
	stateDir := cfg.StateDir
	sock := filepath.Join(stateDir, config.ControlSocket)
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		if inUse := embedded.StateDirInUse(stateDir); inUse != nil && inUse.Holder == "" {
			// A daemon holds the state dir and has no socket yet: it
			// is starting, and a first start waits for its store (a
			// full or slow disk under the state dir). "Not running,
			// start it" sent the user to start a second one.
			return fmt.Errorf("%w: pid %s holds the state dir %s and its control socket is not open yet: its store is still opening (a first start waits while the disk under the state dir is full or slow); its log says what it waits for",
				errStarting, inUse.PIDText(), stateDir)
		}
		if pid, ok := watch.RootHolder(cfg.SessionsDir); ok {
			if other := holderStateDir(pid); other != "" && other != stateDir {
				// The usual case: a service whose env file sets
				// PISYNC_STATE_DIR, asked from a shell that does not.
				return fmt.Errorf("pisyncd (pid %d) follows the sessions dir %s with the state dir %s, not %s: run this command with PISYNC_STATE_DIR=%s, as the daemon has it",
					pid, cfg.SessionsDir, other, stateDir, other)
			}
			// Earlier still: a first start that cannot write its node
			// id (the disk under the state dir full) holds the
			// sessions dir alone while it waits. Or a daemon with
			// another state dir, where it cannot be told.
			return fmt.Errorf("%w: pid %d holds the sessions dir %s and has no control socket in the state dir %s: either it runs with another state dir (run this command with the PISYNC_STATE_DIR it has), or it waits to start (a first start waits while the disk under the state dir is full; its log says what it waits for)",
				errStarting, pid, cfg.SessionsDir, stateDir)
		}
		return fmt.Errorf("%w (no answer on %s): start it (pisyncd run, or its service)", errNotRunning, sock)
	}
	if errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
		// Ctrl-C while the daemon worked on the answer: nothing is
		// stuck (an erase of a long session takes minutes). The
		// request may end with the signal's cause ("received
		// interrupt") rather than context.Canceled: that was taken for
		// a stuck daemon (a verifying probe, 2026-12-07).
		return fmt.Errorf("interrupted before pisyncd answered: %w", err)
	}
	return fmt.Errorf("pisyncd did not answer on %s: %w; it may be stuck: its log says why, and restarting it (its service, or pisyncd run) mends it", sock, err)
}

// holderStateDir is the state dir of pisyncd process pid, found among its
// open files (its state dir's lock, held), where the system lists them
// (/proc); "" when it cannot be told.
func holderStateDir(pid int) string {
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fds)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(fds, e.Name()))
		if err != nil || filepath.Base(target) != "lock" {
			continue
		}
		if dir := filepath.Dir(target); embedded.StateDirInUse(dir) != nil {
			return dir
		}
	}
	return ""
}

// answerTimeout is how long a read waits for the daemon's first byte.
// The daemon answers a context of a 200 MB session within a second
// (docs/PERFORMANCE.md); this is for a daemon that does not answer at all.
var answerTimeout = 30 * time.Second

// storeExists reports whether a daemon ever made its store in the state dir.
func storeExists(cfg *config.Config) bool {
	st, err := os.Stat(filepath.Join(cfg.StateDir, "jetstream"))
	return err == nil && st.IsDir()
}

// askDaemon asks the running daemon for path and hands the answer to
// fromDaemon. When no daemon runs, it opens the store itself (taking the
// state dir lock) and calls fromStore instead; when there is no store
// either, it returns errNoStore and creates nothing.
func askDaemon(ctx context.Context, cfg *config.Config, path string, fromDaemon func(io.Reader) error, fromStore func(*Daemon) error) error {
	resp, err := getControl(ctx, cfg, path)
	if err == nil {
		defer resp.Body.Close()
		return fromDaemon(&trailerCheck{resp})
	}
	if !errors.Is(err, errNotRunning) {
		return err
	}
	if !storeExists(cfg) {
		return fmt.Errorf("%w (no store in %s)", errNoStore, cfg.StateDir)
	}
	cmd, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "?")
	d, err := openStoreAs(ctx, cfg, slog.New(slog.DiscardHandler), "pisyncd "+cmd)
	if err != nil {
		return err
	}
	defer d.Close()
	return fromStore(d)
}

// trailerCheck reads an answer's body and, at its end, turns an error the
// daemon sent in the ErrorTrailer trailer (an answer that failed after it
// began) into the read's error.
type trailerCheck struct{ resp *http.Response }

func (t *trailerCheck) Read(p []byte) (int, error) {
	n, err := t.resp.Body.Read(p)
	if err == io.EOF {
		if msg := t.resp.Trailer.Get(projection.ErrorTrailer); msg != "" {
			return n, &daemonError{status: http.StatusUnprocessableEntity, msg: msg}
		}
	}
	return n, err
}
