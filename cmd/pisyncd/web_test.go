package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/replicate"
)

// TestWebProcess: the web view on PISYNC_HTTP_ADDR of a real daemon
// process beside /metrics, `pisyncd web` printing its URL (and the fix
// when the address is unset), an event stream following an append, and
// SIGTERM stopping the daemon while that stream is open.
func TestWebProcess(t *testing.T) {
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	base := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_LOG_LEVEL=warn", "GOMEMLIMIT="}

	var out bytes.Buffer
	// No daemon and no address: that nothing runs, and how to start it
	// with the view (before: "restart pisyncd", as if one ran).
	if code := runCmd(t, append(base, "PISYNC_HTTP_ADDR="), &out, "web"); code != 1 || !strings.Contains(out.String(), "pisyncd is not running") ||
		!strings.Contains(out.String(), "PISYNC_HTTP_ADDR is unset. Start it with one, e.g. PISYNC_HTTP_ADDR=127.0.0.1:9466 pisyncd run") {
		t.Errorf("web without an address: exit %d: %s", code, out.String())
	}
	addr := testenv.FreeAddr(t)
	env := append(base, "PISYNC_HTTP_ADDR="+addr)
	p := startDaemonProc(t, env)
	path := filepath.Join(sessions, "--p--", "2026-11-30T00-00-00-000Z_sid-1.jsonl")
	os.MkdirAll(filepath.Dir(path), 0o700)
	appendLine(t, path, hdrLine("sid-1", "/p"))
	appendLine(t, path, msgLine("e1", "", "hello"))

	// `pisyncd web` prints the link with the token, which only the user
	// can read; the view answers nothing without it.
	var token string
	waitUntil(t, 20*time.Second, func() (bool, string) {
		out.Reset()
		code := runCmd(t, env, &out, "web")
		link, ok := strings.CutPrefix(strings.TrimSpace(out.String()), "http://"+addr+"/?token=")
		token = link
		return code == 0 && ok && len(token) == 64, out.String()
	})
	if resp, err := http.Get("http://" + addr + "/api/sessions"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the view without the token: %v %v", resp, err)
	}
	get := func(path string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("X-Pisync-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	waitUntil(t, 20*time.Second, func() (bool, string) {
		_, body := get("/api/sessions")
		return strings.Contains(body, `"id":"sid-1"`), body
	})
	if resp, body := get("/"); resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") || !strings.Contains(body, "/assets/list.js") {
		t.Errorf("/: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, body := get("/metrics"); resp.StatusCode != 200 || !strings.Contains(body, "pisyncd_lines_published_total") {
		t.Errorf("/metrics: %d", resp.StatusCode)
	}
	// A path the mux would redirect ("//x", "/s") is checked as any
	// other: a DNS-rebinding page's Host gets no answer of the daemon's.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"//evil.example/x", "/s", "/a/../metrics"} {
		req, _ := http.NewRequest("GET", "http://"+addr+p, nil)
		req.Host = "evil.example"
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("%s under Host evil.example: %d %s, want 421", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := get("/healthz"); resp.StatusCode != 200 {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}

	req, _ := http.NewRequest("GET", "http://"+addr+"/api/events?format=ndjson&session=sid-1", nil)
	req.Header.Set("X-Pisync-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	<-lines // ready
	appendLine(t, path, msgLine("e2", "e1", "live"))
	select {
	case l := <-lines:
		if !strings.Contains(l, `"entryId":"e2"`) {
			t.Errorf("event: %s", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no event for the append")
	}
	start := time.Now()
	p.kill(t, syscall.SIGTERM) // the stream is still open
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code after SIGTERM: %d\n%s", code, p.stderr)
	}
	t.Logf("stopped %v after SIGTERM with an event stream open", time.Since(start))
	for range lines {
	}
}

// TestLocateSessionNeverBlocks: a FIFO, or a link to a device, where a
// session's file was (the catalog still names it) is passed over at once.
// A plain open of the FIFO waited for a writer that never came, holding
// one of the view's two session reads: two page loads left every session
// page of the view waiting until the daemon restarted.
func TestLocateSessionNeverBlocks(t *testing.T) {
	root := t.TempDir()
	const sid = "aaaaaaaa-1111-2222-3333-444444444444"
	own := filepath.Join("--tmp-x--", "2026-01-01T00-00-00-000Z_"+sid+".jsonl")
	if err := os.MkdirAll(filepath.Join(root, "--tmp-x--"), 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(root, own)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Let a reader blocked in open (without the fix) go.
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			f.Close()
		}
	})
	// A remote node's file name, where the replicator would put it: a link
	// to a device.
	if err := os.Symlink("/dev/zero", filepath.Join(root, "--tmp-x--", "2026-01-01T00-00-00-000Z_remote.jsonl")); err != nil {
		t.Fatal(err)
	}
	c := projection.CatalogEntry{SessionID: sid, Cwd: "/tmp/x", Files: projection.NodeFiles{
		{Node: "remote", File: "--tmp-x--/2026-01-01T00-00-00-000Z_remote.jsonl"},
		{Node: "ws1", File: filepath.ToSlash(own)},
	}}
	type result struct {
		p   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := locateSession(root, "ws1", replicate.PathMap{}, c)
		done <- result{p, err}
	}()
	select {
	case r := <-done:
		if r.err != nil || r.p != "" {
			t.Errorf("locateSession = %q, %v; want no copy found", r.p, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("locateSession blocked on a FIFO under the session's file name")
	}
}

// TestHealthzOnHTTPIsTerse: /healthz on the HTTP listener, which any local
// user asks without the token, says whether the daemon is well and not
// why: the reason named files of the user's state dir.
func TestHealthzOnHTTPIsTerse(t *testing.T) {
	const failing = "event store failing since 2026-12-03T00:00:00Z: write /home/ann/.local/state/pisyncd/jetstream/x.blk: no space left on device"
	rec := httptest.NewRecorder()
	answerHealth(rec, failing, false)
	if rec.Code != http.StatusServiceUnavailable || strings.Contains(rec.Body.String(), "/home/ann") || rec.Header().Get("Connection") != "close" {
		t.Errorf("failing: %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
	rec = httptest.NewRecorder()
	answerHealth(rec, "", false)
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != "ok" {
		t.Errorf("well: %d %q", rec.Code, rec.Body.String())
	}
}

// TestWebLinkOnlyFromTheDaemon: with no daemon running, pisyncd web names
// the address but not the token. Whoever listens on the address gets the
// link the user opens, and any user of the machine may listen there first
// (which also keeps the daemon from starting): the token went to them.
func TestWebLinkOnlyFromTheDaemon(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, "state")
	os.Mkdir(state, 0o700)
	token, err := webToken(state)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PISYNC_SESSIONS_DIR=" + filepath.Join(home, "sessions"), "PISYNC_STATE_DIR=" + state, "PISYNC_HTTP_ADDR=127.0.0.1:1", "GOMEMLIMIT="}
	var out bytes.Buffer
	if code := runCmd(t, env, &out, "web"); code != 0 || strings.Contains(out.String(), token) || !strings.Contains(out.String(), "http://127.0.0.1:1/") {
		t.Errorf("web without a daemon: exit %d: %s", code, out.String())
	}
}
