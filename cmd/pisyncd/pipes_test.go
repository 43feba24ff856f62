package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestDaemonOutlivesItsLogReader: the daemon's log goes to a pipe whose
// reader goes away (`pisyncd 2>&1 | tee log` and tee is killed, a log
// collector restarted). Go ends a program whose write to a broken pipe on
// stdout or stderr fails unless it handles SIGPIPE, so the daemon would stop
// syncing at its next log line. It goes on, and stops cleanly when told.
func TestDaemonOutlivesItsLogReader(t *testing.T) {
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	p := startLogless(t, `msg="pisyncd running"`, "PISYNC_SESSIONS_DIR="+sessions, "PISYNC_STATE_DIR="+state,
		"PISYNC_NODE_ID=pipe-node", "PISYNC_RESCAN_INTERVAL=200ms", "PISYNC_LOG_LEVEL=info")

	// A file that is not a session: the tailer says it ignores it, a
	// line written to the broken pipe.
	dir := filepath.Join(sessions, "--pipe--")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.jsonl"), []byte(`{"type":"message","id":"x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "the file ignored", func() bool {
		st, err := controlStatus(state)
		return err == nil && st.Tailer.FilesIgnored == 1
	})
	// A session after it is still stored: the daemon went on.
	sid := "01a247c6-165a-76b2-84c6-290d5b21c3aa"
	lines := `{"type":"session","version":3,"id":"` + sid + `","timestamp":"2026-12-05T21:01:00.000Z","cwd":"/pipe"}` + "\n" +
		`{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-12-05T21:01:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "2026-12-05T21-01-00-000Z_"+sid+".jsonl"), []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "the session stored", func() bool {
		got, err := controlEvents(state, sid)
		return err == nil && len(got) == 2
	})
	// Stopping logs too; the daemon still stops as it should.
	p.stop(t)
}

// TestHubOutlivesItsLogReader is the same for a hub node: a reload
// (SIGHUP) and the stop write to the broken pipe, and it stops cleanly.
func TestHubOutlivesItsLogReader(t *testing.T) {
	p := startLogless(t, `msg="hub running"`, "PISYNC_HUB_NAME=hub-pipe", "PISYNC_HUB_STATE_DIR="+t.TempDir(),
		"PISYNC_HUB_LEAF_LISTEN="+testenv.FreeAddr(t), "PISYNC_HUB_LISTEN="+testenv.FreeAddr(t), "PISYNC_LOG_LEVEL=info")
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.stop(t)
}

// loglessProc is `pisyncd run` or `pisyncd hub` whose log reader is gone.
type loglessProc struct {
	cmd    *exec.Cmd
	done   chan error
	exited bool
}

// startLogless starts this test binary as pisyncd (`hub` when env names a
// hub setting, `run` otherwise) with stdout and stderr on a pipe, reads the
// log until a line holds marker, and closes the pipe's read end.
func startLogless(t *testing.T, marker string, env ...string) *loglessProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "run")
	if strings.HasPrefix(env[0], "PISYNC_HUB_") {
		cmd.Args[1] = "hub"
	}
	cmd.Env = append(append(os.Environ(), "PISYNC_TEST_AS_MAIN=1"), env...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	p := &loglessProc{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if !p.exited {
			cmd.Process.Kill()
			<-p.done
		}
	})
	seen := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if strings.Contains(sc.Text(), marker) {
				seen <- true
				io.Copy(io.Discard, r) // until the read end is closed below
				return
			}
		}
		seen <- false
	}()
	select {
	case ok := <-seen:
		if !ok {
			t.Fatalf("the log ended before %s", marker)
		}
	case err := <-p.done:
		p.exited = true
		t.Fatalf("exited before %s: %v", marker, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("no %s within 60 s", marker)
	}
	r.Close()
	return p
}

// waitFor waits until cond holds, failing if the process exits first.
func (p *loglessProc) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for !cond() {
		select {
		case err := <-p.done:
			p.exited = true
			t.Fatalf("exited (%v) before %s", err, what)
		case <-deadline:
			t.Fatalf("not %s within 60 s", what)
		case <-tick.C:
		}
	}
}

// stop sends SIGINT and wants exit 0 (not "signal: broken pipe").
func (p *loglessProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.done:
		p.exited = true
		if err != nil {
			t.Fatalf("stopped with %v, want exit 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("did not stop within 60 s of SIGINT")
	}
}

// controlStatus reads the daemon's status through its control socket.
func controlStatus(stateDir string) (Status, error) {
	var st Status
	resp, err := controlClient(stateDir).Get("http://pisyncd/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, errors.New(resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// TestSettingFileIsAPipe: a setting that names a named pipe no one writes
// to (PISYNC_HUB_NKEY) or a file the hub link reads again and again
// (PISYNC_HUB_CREDS) stops the start at once, saying so. Before, the daemon
// waited in the open for ever, deaf to SIGTERM, having logged only that it
// was starting.
func TestSettingFileIsAPipe(t *testing.T) {
	home := t.TempDir()
	fifo := filepath.Join(home, "seed")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ env, want string }{
		{"PISYNC_HUB_NKEY", "PISYNC_HUB_NKEY: " + fifo + " is a named pipe that nothing writes to"},
		{"PISYNC_HUB_CREDS", "PISYNC_HUB_CREDS: " + fifo + " is not a regular file"},
	} {
		setEnv(t, filepath.Join(home, "sessions"), filepath.Join(home, "state"))
		t.Setenv("PISYNC_HUB_URLS", "nats://127.0.0.1:1")
		t.Setenv("PISYNC_HUB_NKEY", "")
		t.Setenv(c.env, fifo)
		type result struct {
			code   int
			stderr string
		}
		done := make(chan result, 1)
		go func() {
			code, _, errOut := mainIn(t, "run")
			done <- result{code, errOut}
		}()
		select {
		case r := <-done:
			if r.code != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%s a pipe: exit %d, stderr %q, want %q", c.env, r.code, r.stderr, c.want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s a pipe: no answer within 60 s", c.env)
		}
	}
}
