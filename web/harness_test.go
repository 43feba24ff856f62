package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/search"
	"github.com/pisyncd/pisyncd/watch"
)

const testNode = "web-node"

// daemon is what the view runs on in the daemon: an embedded server, the
// tailer over a sessions dir and the projection worker, all real.
type daemon struct {
	t      testing.TB
	root   string
	worker *projection.Worker
	nc     *nats.Conn
	web    *Server
	http   *httptest.Server
}

func startDaemon(t testing.TB) *daemon { t.Helper(); return startDaemonSearch(t, false) }

// startDaemonSearch is startDaemon with, when withSearch, a real search
// index (package search) following the streams behind /api/search.
func startDaemonSearch(t testing.TB, withSearch bool) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root, state := t.TempDir(), t.TempDir()
	srv, err := embedded.Start(ctx, embedded.Config{StateDir: state, NodeID: testNode})
	if err != nil {
		t.Fatalf("embedded: %v", err)
	}
	nc, err := srv.Connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	lg, err := eventlog.OpenLocal(ctx, nc, testNode)
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	tl := watch.New(lg, watch.Options{Root: root, Workers: 2, RescanInterval: 100 * time.Millisecond, MaxLine: 64 << 20})
	w, err := projection.New(nc, projection.Options{Node: testNode})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	go func() { errs <- tl.Run(ctx) }()
	go func() { errs <- w.Run(ctx) }()
	runs := 2
	var searchAPI http.Handler
	if withSearch {
		ix, err := search.Open(filepath.Join(state, "search"))
		if err != nil {
			t.Fatal(err)
		}
		sw, err := search.NewWorker(nc, ix, search.Options{Node: testNode})
		if err != nil {
			t.Fatal(err)
		}
		runs++
		go func() { errs <- sw.Run(ctx) }()
		t.Cleanup(func() { ix.Close() }) // after the worker stopped: cleanups run last first
		searchAPI = ix.Handler(nil)
	}
	t.Cleanup(func() {
		cancel()
		for range runs {
			if err := <-errs; err != nil {
				t.Errorf("worker: %v", err)
			}
		}
		nc.Close()
		srv.Close()
	})
	select {
	case <-w.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("projection not ready")
	}
	d := &daemon{t: t, root: root, worker: w, nc: nc}
	d.web, err = New(Options{Token: testToken, Source: w, Node: testNode, Search: searchAPI, Locate: func(_ context.Context, c projection.CatalogEntry) (string, error) {
		if f := c.Files.Get(testNode); f != "" {
			return filepath.Join(root, f), nil
		}
		return "", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	d.http = httptest.NewUnstartedServer(d.web)
	d.http.Config.ConnContext = ConnContext // as the daemon's listener
	d.http.Start()
	t.Cleanup(func() { closeServer(d.http) })
	return d
}

// closeServer closes h for good. Close waits for every request in
// progress, and a browser the test still has open (its cleanup runs after
// this one when it was made first) keeps its page's event stream going:
// it reconnects 1 s after a drop. So no new connection is taken first,
// then the open ones end (their handlers see it), then Close.
func closeServer(h *httptest.Server) {
	h.Listener.Close()
	h.CloseClientConnections()
	h.Close()
}

// write writes a session file of lines under a project folder.
func (d *daemon) write(sid string, lines ...string) string {
	d.t.Helper()
	p := filepath.Join(d.root, "--home-u-p--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		d.t.Fatal(err)
	}
	testenv.WriteFile(d.t, p, []byte(strings.Join(lines, "\n")+"\n"))
	return p
}

// waitEntries waits until the catalog holds sid with n entries.
func (d *daemon) waitEntries(sid string, n int) {
	d.t.Helper()
	// A deadline, not a wait: 10k entries or 20 MiB lines under -race on
	// a loaded machine take a while.
	testenv.WaitFor(d.t, 3*time.Minute, func() (bool, string) {
		cat, err := d.worker.Catalog(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, c := range cat {
			if c.SessionID == sid {
				return c.Entries == n, "entries " + itoa(c.Entries)
			}
		}
		return false, "session not in the catalog"
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// get fetches path from the view with the loopback Host, presenting the
// token.
func (d *daemon) get(path string) (*http.Response, string) {
	d.t.Helper()
	resp, err := viewClient.Get(d.http.URL + path)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// testToken is the token of every view the tests make.
const testToken = "test-token-0123456789abcdef"

// viewClient is an HTTP client that presents testToken, as a program does.
var viewClient = &http.Client{Transport: tokenTransport{}}

// tokenTransport adds the token to each request it sends through base
// (nil: http.DefaultTransport, whose connections every client shares).
type tokenTransport struct{ base http.RoundTripper }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(TokenHeader, testToken)
	if t.base == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	return t.base.RoundTrip(r)
}

// viewLink is the link `pisyncd web` would print for u: a browser that
// opens it gets the token's cookie and lands on u.
func viewLink(u string) string {
	if strings.Contains(u, "?") {
		return u + "&" + TokenParam + "=" + testToken
	}
	return u + "?" + TokenParam + "=" + testToken
}
