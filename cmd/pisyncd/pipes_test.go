package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

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
	p := startLogless(t, `msg="pisyncd running"`, []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state,
		"PISYNC_NODE_ID=pipe-node", "PISYNC_RESCAN_INTERVAL=200ms", "PISYNC_LOG_LEVEL=info"}, "run")
	ctl := controlClient(state)

	// A file that is not a session: the tailer says it ignores it, a
	// line written to the broken pipe.
	dir := filepath.Join(sessions, "--pipe--")
	testenv.WriteFile(t, filepath.Join(dir, "notes.jsonl"), []byte(`{"type":"message","id":"x"}`+"\n"))
	testenv.WaitFor(t, 60*time.Second, func() (bool, string) {
		p.alive(t)
		return daemonStatus(ctl).Tailer.FilesIgnored == 1, "the file ignored"
	})
	// A session after it is still stored: the daemon went on.
	sid := "01a247c6-165a-76b2-84c6-290d5b21c3aa"
	lines := testenv.HeaderAt(sid, "/pipe", "2026-12-05T21:01:00.000Z") + "\n" + testenv.Entry("a1b2c3d4", "", "hi") + "\n"
	testenv.WriteFile(t, filepath.Join(dir, "2026-12-05T21-01-00-000Z_"+sid+".jsonl"), []byte(lines))
	testenv.WaitFor(t, 60*time.Second, func() (bool, string) {
		p.alive(t)
		got, err := controlEvents(state, sid)
		return err == nil && len(got) == 2, "the session stored"
	})
	// Stopping logs too; the daemon still stops as it should.
	if err := p.kill(t, syscall.SIGINT); err != nil {
		t.Fatalf("stopped with %v, want exit 0", err)
	}
}

// TestHubOutlivesItsLogReader is the same for a hub node: a reload
// (SIGHUP) and the stop write to the broken pipe, and it stops cleanly.
func TestHubOutlivesItsLogReader(t *testing.T) {
	p := startLogless(t, `msg="hub running"`, []string{"PISYNC_HUB_NAME=hub-pipe", "PISYNC_HUB_STATE_DIR=" + t.TempDir(),
		"PISYNC_HUB_LEAF_LISTEN=" + testenv.FreeAddr(t), "PISYNC_HUB_LISTEN=" + testenv.FreeAddr(t), "PISYNC_LOG_LEVEL=info"}, "hub")
	p.cmd.Process.Signal(syscall.SIGHUP)
	if err := p.kill(t, syscall.SIGINT); err != nil {
		t.Fatalf("stopped with %v, want exit 0", err)
	}
}

// startLogless starts `pisyncd args...` with env, its stdout and stderr on
// a pipe, reads the log until a line holds marker, and closes the pipe's
// read end: from then on every line the process logs meets a broken pipe.
func startLogless(t *testing.T, marker string, env []string, args ...string) *daemonProc {
	t.Helper()
	cmd := pisyncdCmd(env, args...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	p := startProc(t, cmd, nil)
	w.Close()
	t.Cleanup(func() { p.cmd.Process.Kill() })
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
		t.Fatalf("exited before %s: %v", marker, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("no %s within 60 s", marker)
	}
	r.Close()
	return p
}

// alive fails t if the process has exited (and leaves its exit for kill).
func (p *daemonProc) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		t.Fatalf("pisyncd exited: %v", err)
	default:
	}
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
		var code int
		var stderr string
		testenv.Within(t, 60*time.Second, c.env+" a pipe", func() { code, _, stderr = mainIn(t, "run") })
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s a pipe: exit %d, stderr %q, want %q", c.env, code, stderr, c.want)
		}
	}
}

// TestSeedFileIsNoSeed: PISYNC_HUB_NKEY naming a file that holds no nkey
// seed (garbage; the hub's node file copied by mistake; an account seed)
// stops the start, naming the setting and the file to use. Before, the
// daemon ran with a hub link that failed every second, "malformed seed"
// in the server's log and nothing naming the setting.
func TestSeedFileIsNoSeed(t *testing.T) {
	home := t.TempDir()
	account, _ := nkeys.CreateAccount()
	aseed, _ := account.Seed()
	for _, c := range []struct{ name, data, want string }{
		{"garbage", "garbage\n", "holds no nkey seed"},
		{"node file", `{"name":"ann","team":"t1","nkey":"UD6WXXXX"}`, "holds no nkey seed"},
		{"account seed", string(aseed), "holds the seed of another kind of key than a node's (it begins with SA"},
	} {
		p := filepath.Join(home, "seed")
		if err := os.WriteFile(p, []byte(c.data), 0o600); err != nil {
			t.Fatal(err)
		}
		setEnv(t, filepath.Join(home, "sessions"), filepath.Join(home, "state"))
		t.Setenv("PISYNC_HUB_URLS", "nats://127.0.0.1:1")
		t.Setenv("PISYNC_HUB_NKEY", p)
		var code int
		var stderr string
		testenv.Within(t, 60*time.Second, c.name, func() { code, _, stderr = mainIn(t, "run") })
		if code != 1 || !strings.Contains(stderr, "PISYNC_HUB_NKEY "+p+" "+c.want) || !strings.Contains(stderr, "pisyncd hub add-node") {
			t.Errorf("%s: exit %d, stderr %q", c.name, code, stderr)
		}
	}
}

// TestFailureIsJSONWhenTheLogIs: a daemon whose log is JSON
// (PISYNC_LOG_FORMAT=json) ends a failed start with a JSON record, level
// ERROR, that says why. Before, a plain "pisyncd: ..." line followed its
// JSON lines, which a log pipeline parsing each line could not read.
func TestFailureIsJSONWhenTheLogIs(t *testing.T) {
	home := t.TempDir()
	seed := filepath.Join(home, "seed")
	if err := os.WriteFile(seed, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	setEnv(t, filepath.Join(home, "sessions"), filepath.Join(home, "state"))
	t.Setenv("PISYNC_HUB_URLS", "nats://127.0.0.1:1")
	t.Setenv("PISYNC_HUB_NKEY", seed)
	t.Setenv("PISYNC_LOG_FORMAT", "json")
	code, _, stderr := mainIn(t, "run")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var last struct{ Level, Msg, Err string }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); code != 1 || err != nil || last.Level != "ERROR" || last.Msg != "pisyncd failed" || !strings.Contains(last.Err, "PISYNC_HUB_NKEY") {
		t.Errorf("exit %d, last line %q (%v)", code, lines[len(lines)-1], err)
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("a line that is no JSON: %q", l)
		}
	}
}

// TestHubSettingFilesNamed: a seed file that is not there, and a CA file
// that holds no certificate, stop the start naming the setting and what
// the file is to be (a probe on 2026-12-06 had a bare "open …: no such
// file or directory", and "hub CA …: no certificate in it" without the
// setting).
func TestHubSettingFilesNamed(t *testing.T) {
	home := t.TempDir()
	seed := filepath.Join(home, "seed.nkey")
	if err := os.WriteFile(seed, []byte("SUAM7TPLA2KSEEDSEEDSEEDSEEDSEEDSEEDSEEDSEEDSEEDSEEDSEEDSE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ env, value, want string }{
		{"PISYNC_HUB_NKEY", filepath.Join(home, "missing.nkey"), "PISYNC_HUB_NKEY " + filepath.Join(home, "missing.nkey") + ": no such file: it is this node's seed file, made on the hub by `pisyncd hub add-node"},
		{"PISYNC_HUB_CA", seed, "(PISYNC_HUB_CA): no certificate in it: set it to the CA that signed the hub's certificate"},
	} {
		setEnv(t, filepath.Join(home, "sessions"), filepath.Join(home, "state"))
		t.Setenv("PISYNC_HUB_URLS", "tls://127.0.0.1:1")
		t.Setenv("PISYNC_HUB_NKEY", "")
		t.Setenv(c.env, c.value)
		var code int
		var stderr string
		testenv.Within(t, 60*time.Second, c.env, func() { code, _, stderr = mainIn(t, "run") })
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s %s: exit %d, stderr %q, want %q", c.env, c.value, code, stderr, c.want)
		}
	}
}
