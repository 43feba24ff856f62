package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/fsutil"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/replicate"
	"github.com/pisyncd/pisyncd/session"
	"github.com/pisyncd/pisyncd/web"
)

// newWeb builds the web view over the daemon's projection.
func newWeb(d *Daemon) (*web.Server, error) {
	pm, err := replicate.ParsePathMap(d.cfg.PathMap)
	if err != nil {
		return nil, fmt.Errorf("PISYNC_PATH_MAP: %w", err)
	}
	var searchH http.Handler // nil: the view says search is off
	if d.searchIx != nil {
		searchH = d.searchIx.Handler(d.searchW.Unindexed)
	}
	token, err := webToken(d.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	return web.New(web.Options{
		Token:  token,
		Source: d.proj,
		Search: searchH,
		Node:   d.cfg.NodeID,
		Rules:  d.cfg.RuleSet(),
		Hosts:  d.cfg.WebHosts,
		Locate: func(ctx context.Context, c projection.CatalogEntry) (string, error) {
			return locateSession(d.cfg.SessionsDir, d.cfg.NodeID, pm, c)
		},
		Logger: d.logger.With("component", "web"),
	})
}

// locateSession finds this machine's copy of a session, the file `pi
// --session` opens here: this node's own file, else where the replicator
// puts another machine's session (in the folder of its cwd here, the
// origin's file name), else whatever file under the sessions dir holds its
// header (a walk: a copy may have any name).
func locateSession(root, node string, pm replicate.PathMap, c projection.CatalogEntry) (string, error) {
	var candidates []string
	if f := c.Files.Get(node); f != "" {
		candidates = append(candidates, filepath.Join(root, filepath.FromSlash(f)))
	}
	if c.Cwd != "" {
		// The catalog's cwd is mapped here already (projection's
		// MapCwd), unless its entry was written before it was, and
		// not read again since.
		cwds := []string{c.Cwd}
		if m := pm.Map(c.Cwd); m != c.Cwd {
			cwds = append(cwds, m)
		}
		for _, cwd := range cwds {
			for _, f := range c.Files {
				candidates = append(candidates, filepath.Join(root, replicate.CwdFolder(cwd), filepath.Base(filepath.FromSlash(f.File))))
			}
		}
	}
	for _, p := range candidates {
		if holdsSession(p, c.SessionID) {
			return p, nil
		}
	}
	live, _, err := replicate.SessionFiles(root, c.SessionID)
	if err != nil {
		return "", err
	}
	if len(live) > 0 {
		return live[0], nil
	}
	return "", nil
}

// holdsSession reports whether the file at p is a session file whose
// header names sid. It opens p without blocking and reads only a regular
// file: a FIFO under a session's name (or a link to one) would hold a plain
// open until a writer came, and with it one of the view's few session
// reads (web.Options.MaxReads) for good: two such requests left every
// session page waiting until a restart.
func holdsSession(p, sid string) bool {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	buf := make([]byte, 4096)
	n, _ := io.ReadFull(f, buf)
	line := buf[:n]
	for i, b := range line {
		if b == '\n' {
			line = line[:i]
			break
		}
	}
	l := session.ParseLine(line)
	return l.Type == "session" && l.HasID && l.ID == sid
}

// webTokenFile holds the web view's token in the state dir (0600): only
// the user reads it, and it outlives a restart, so an open page, a
// bookmark's cookie and a program's set-up keep working.
const webTokenFile = "web-token"

// webToken reads the view's token from the state dir, making it first.
func webToken(stateDir string) (string, error) {
	return tokenFile(filepath.Join(stateDir, webTokenFile), "web token")
}

// tokenFile reads the token in the file at path, making it first (0600);
// what names it in an error.
func tokenFile(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(bytes.TrimSpace(b)) >= 32 {
		return string(bytes.TrimSpace(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	// Missing, or too short to be one pisyncd made: a new one.
	token, err := web.NewToken()
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if err := fsutil.WriteFileAtomic(path, []byte(token+"\n")); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return token, nil
}

// webLink is the view's address with the token a browser needs once.
func webLink(base, token string) string {
	if token == "" {
		return base
	}
	return base + "?" + web.TokenParam + "=" + token
}

// serveWebURL tells `pisyncd web` where the view is: the link with the
// token (the control socket is the user's alone).
func (d *Daemon) serveWebURL(w http.ResponseWriter, r *http.Request) {
	u := d.httpURL.Load()
	if u == nil {
		http.Error(w, webUnset, http.StatusNotFound)
		return
	}
	writeJSON(w, map[string]string{"url": webLink(*u, d.web.Token())})
}

const webUnset = "the web view is off: PISYNC_HTTP_ADDR is unset. Set it to a loopback address, e.g. PISYNC_HTTP_ADDR=127.0.0.1:9466, and restart pisyncd"

// webCommand prints the web view's link with its token: the running
// daemon's, else the configured address's.
func webCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("web", flag.ContinueOnError)
	if err := parseArgs(fs, args, "pisyncd web", 0); err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := getControl(ctx, cfg, "/web")
	if err == nil {
		defer resp.Body.Close()
		var v struct{ URL string }
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return fmt.Errorf("web: %w", err)
		}
		_, err = fmt.Fprintln(stdout, v.URL)
		return err
	}
	var de *daemonError
	if errors.As(err, &de) && de.status == http.StatusNotFound {
		return errors.New(de.msg)
	}
	if !errors.Is(err, errNotRunning) {
		return err
	}
	if cfg.HTTPAddr == "" {
		// Not "restart": nothing runs, and the address the daemon would
		// serve on is the one set where it starts, not in this shell.
		return fmt.Errorf("%w, and the web view is off here: PISYNC_HTTP_ADDR is unset. Start it with one, e.g. PISYNC_HTTP_ADDR=127.0.0.1:9466 pisyncd run (or in ~/.config/pisyncd/env for the service), then run pisyncd web again", errNotRunning)
	}
	// Not the token: with no daemon on the address, whoever listens there
	// gets the link, and any user of the machine may (an audit took the
	// port first, which kept the daemon from starting, and read the token
	// from the link the user then opened). A running daemon's answer is
	// from the port it holds.
	_, err = fmt.Fprintf(stdout, "http://%s/\n(the daemon is not running: start it with pisyncd run, then pisyncd web prints the link with the view's token)\n", cfg.HTTPAddr)
	return err
}
