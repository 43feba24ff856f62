package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestDaemonProcess runs pisyncd as a real process: status and events
// answer through the control socket, /metrics and /healthz on loopback,
// and SIGTERM stops it cleanly.
func TestDaemonProcess(t *testing.T) {
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	addr := testenv.FreeAddr(t)
	env := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_HTTP_ADDR=" + addr, "PISYNC_LOG_LEVEL=warn", "GOMEMLIMIT="}
	p := startDaemonProc(t, env)

	path := filepath.Join(sessions, "--p--", "2026-11-30T00-00-00-000Z_sid-1.jsonl")
	os.MkdirAll(filepath.Dir(path), 0o700)
	appendLine(t, path, hdrLine("sid-1", "/p"))
	appendLine(t, path, msgLine("e1", "", "hello"))

	var st Status
	waitUntil(t, 20*time.Second, func() (bool, string) {
		var out bytes.Buffer
		cmd := runCmd(t, env, &out, "status", "--json")
		if cmd != 0 {
			return false, "status failed: " + out.String()
		}
		st = Status{}
		json.Unmarshal(out.Bytes(), &st)
		return st.Tailer.LinesPublished == 2 && st.Stream.Messages == 2, out.String()
	})
	if st.Node == "" || st.Stream.Messages != 2 || st.Stream.Subjects != 1 {
		t.Errorf("status: %+v", st)
	}
	// The default budget, its Go limit (less the 256 MiB reserve, plus 96
	// MiB) and the tailer's quarter of what the reserve leaves.
	if st.MemoryBudget != 512<<20 || st.GoMemoryLimit != 352<<20 || st.Tailer.MemoryBudget != 64<<20 {
		t.Errorf("status: memory budget %d, Go limit %d, the tailer's share %d; want 512, 352 and 64 MiB", st.MemoryBudget, st.GoMemoryLimit, st.Tailer.MemoryBudget)
	}
	// A daemon that ran has collected, and holds pages for what is live.
	if st.Heap.LiveBytes == 0 || st.Heap.InUseBytes < st.Heap.LiveBytes || st.Heap.InUseBytes > uint64(st.GoMemoryLimit) {
		t.Errorf("status: heap %+v; want 0 < live <= in use <= the Go limit", st.Heap)
	}
	var out bytes.Buffer
	if code := runCmd(t, env, &out, "status"); code != 0 || !regexp.MustCompile(`(?m)^memory budget\s+536870912 bytes .*Go memory limit 369098752$(?s:.*)^Go heap\s+\d+ bytes live`).MatchString(out.String()) {
		t.Errorf("status text lacks the memory budget: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := runCmd(t, env, &out, "events", "sid-1", "--json"); code != 0 {
		t.Fatalf("events: exit %d: %s", code, out.String())
	}
	evs := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(evs) != 2 || !strings.Contains(evs[1], `"entryId":"e1"`) || !strings.Contains(evs[1], `"type":"message"`) {
		t.Fatalf("events: %q", evs)
	}

	// /metrics: with the token of STATE_DIR/web-token (0600), as a
	// scraper's bearer token; without it, nothing.
	token, err := os.ReadFile(filepath.Join(state, "web-token"))
	if st, serr := os.Stat(filepath.Join(state, "web-token")); err != nil || serr != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("web-token: %v %v %v", err, serr, st)
	}
	// The control socket answers whoever may open it: its owner alone.
	if st, err := os.Stat(filepath.Join(state, config.ControlSocket)); err != nil {
		t.Fatalf("control socket: %v", err)
	} else if st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o600 {
		t.Fatalf("control socket: mode %v, want a socket 0600", st.Mode())
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte("pisyncd_lines_published_total 2")) {
		t.Errorf("metrics lack the published count:\n%s", body)
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err = http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	// HEAD, as a probe asking for the status line alone (before: 401).
	if resp, err := http.Head("http://" + addr + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// A second daemon on the same state dir is refused with a clear error.
	out.Reset()
	if code := runCmd(t, env, &out, "run"); code == 0 || !strings.Contains(out.String(), "in use by another pisyncd") {
		t.Errorf("second daemon: exit %d: %s", code, out.String())
	}

	start := time.Now()
	p.kill(t, syscall.SIGTERM)
	if err := p.cmd.ProcessState.ExitCode(); err != 0 {
		t.Errorf("exit code after SIGTERM: %d\n%s", err, p.stderr)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start))
	if _, err := os.Stat(filepath.Join(state, config.ControlSocket)); !os.IsNotExist(err) {
		t.Errorf("control socket left behind: %v", err)
	}
	// Without a daemon, events opens the store itself.
	out.Reset()
	if code := runCmd(t, env, &out, "events", "sid-1"); code != 0 || strings.Count(out.String(), "\n") != 2 {
		t.Errorf("events without daemon: exit %d: %s", code, out.String())
	}
	out.Reset()
	if code := runCmd(t, env, &out, "status"); code != 1 || !strings.Contains(out.String(), "not running") {
		t.Errorf("status without daemon: exit %d: %s", code, out.String())
	}
}

// runCmd runs one pisyncd command in a child process and returns its exit
// code; stdout and stderr go to out.
func runCmd(t *testing.T, env []string, out *bytes.Buffer, args ...string) int {
	t.Helper()
	p := startDaemonProcArgs(t, env, out, args...)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("pisyncd %v did not finish", args)
	}
	return p.cmd.ProcessState.ExitCode()
}
