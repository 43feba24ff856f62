package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// The session the examples' tests write with the real pi writer: two turns,
// the first with a tool call (two assistant messages, $0.01 + $0.002), the
// second of one message ($0.5).
const examplesScript = `[
 {"op": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
 {"op": "user", "text": "list the files"},
 {"op": "assistant", "text": "looking", "toolCalls": [{"id": "c1", "name": "bash", "arguments": {"command": "ls"}}],
  "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15, "cost": {"input": 0.004, "output": 0.006, "cacheRead": 0, "cacheWrite": 0, "total": 0.01}}},
 {"op": "toolResult", "toolCallId": "c1", "toolName": "bash", "text": "a b"},
 {"op": "assistant", "text": "two files: a and b",
  "usage": {"input": 20, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 25, "cost": {"input": 0.001, "output": 0.001, "cacheRead": 0, "cacheWrite": 0, "total": 0.002}}},
 {"op": "user", "text": "thanks"},
 {"op": "assistant", "text": "you are welcome",
  "usage": {"input": 30, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 35, "cost": {"input": 0.25, "output": 0.25, "cacheRead": 0, "cacheWrite": 0, "total": 0.5}}}
]`

// exampleDaemon runs a daemon with the local listener, as
// docs/SUBSCRIBING.md says to, and points the commands at it.
func exampleDaemon(t *testing.T) *station {
	cfg := stationConfig(t, "ws-ex", "")
	cfg.HubURLs, cfg.Listen = nil, "127.0.0.1:0"
	s := runStation(t, cfg)
	setEnv(t, cfg.SessionsDir, cfg.StateDir)
	t.Setenv("PISYNC_NODE_ID", cfg.NodeID)
	return s
}

// writeWithPi writes examplesScript as a new session with real pi's
// writer and returns the session id.
func writeWithPi(t *testing.T, s *station) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(examplesScript), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.cfg.SessionsDir, "--home-u-proj--")
	out, err := testenv.RunOracle(t, 60*time.Second, "write", dir, "--cwd", "/home/u/proj", "--script", script)
	if err != nil {
		t.Fatal(err)
	}
	// The summary line names the file: <timestamp>_<session id>.jsonl.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	i := strings.LastIndex(last, "_")
	j := strings.LastIndex(last, ".jsonl")
	if i < 0 || j < i {
		t.Fatalf("pi-oracle write: %s", out)
	}
	return last[i+1 : j]
}

// lineReader collects a process's output lines.
type lineReader struct {
	mu    sync.Mutex
	lines []string
}

func (r *lineReader) read(rd io.Reader) {
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		r.mu.Lock()
		r.lines = append(r.lines, sc.Text())
		r.mu.Unlock()
	}
}

func (r *lineReader) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// wantTurns checks the two lines every example prints for examplesScript.
func wantTurns(t *testing.T, got []string, sid string) {
	t.Helper()
	want := []string{"$0.012 (anthropic/claude-sonnet-4-5)", "$0.5 (anthropic/claude-sonnet-4-5)"}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, l := range got {
		if !strings.HasPrefix(l, "turn ended: session "+sid+" entry ") || !strings.Contains(l, " on ws-ex: stop, ") || !strings.HasSuffix(l, want[i]) {
			t.Errorf("line %d: %q, want session %s and %q", i, l, sid, want[i])
		}
	}
}

// TestExampleNotifyGo: examples/notify-go, built as a user builds it,
// follows a running daemon through the read-only local listener and prints
// one line for each assistant turn that real pi's writer ends, with the
// turn's cost; then, with -from-start, the same two from the streams.
func TestExampleNotifyGo(t *testing.T) {
	testenv.Oracle(t)
	bin := filepath.Join(t.TempDir(), "notify-go")
	build := exec.Command("go", "build", "-o", bin, "./examples/notify-go")
	build.Dir = filepath.Dir(testenv.TestdataDir(t))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/notify-go: %v\n%s", err, out)
	}
	s := exampleDaemon(t)
	creds := filepath.Join(s.cfg.StateDir, "client-context.json")

	run := func(args ...string) (*exec.Cmd, *lineReader, *testenv.LogBuffer) {
		return startNotify(t, bin, creds, args...)
	}
	wait := func(cmd *exec.Cmd, stderr *testenv.LogBuffer) {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("notify-go: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("notify-go did not see two turns within 30 s\n%s", stderr.String())
		}
	}

	// Live: subscribed first, then pi writes.
	cmd, lr, stderr := run()
	waitUntil(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(stderr.String(), "notify-go: following the sessions"), stderr.String()
	})
	sid := writeWithPi(t, s)
	wait(cmd, stderr)
	wantTurns(t, lr.get(), sid)

	// Replay: what the streams hold.
	cmd, lr, stderr = run("-from-start")
	wait(cmd, stderr)
	wantTurns(t, lr.get(), sid)
}

// TestExampleNotifyGoAcrossRestart: examples/notify-go, following, keeps
// its connection through a restart of the daemon, and prints the turns of
// a session pi wrote while the daemon was down, with no later line to
// show the gap: nats.go subscribes again on the reconnect, and the
// example reads what was stored meanwhile (follow.go, catchUp). Before,
// it printed nothing until some later line came, maybe never.
func TestExampleNotifyGoAcrossRestart(t *testing.T) {
	testenv.Oracle(t)
	bin := filepath.Join(t.TempDir(), "notify-go")
	build := exec.Command("go", "build", "-o", bin, "./examples/notify-go")
	build.Dir = filepath.Dir(testenv.TestdataDir(t))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/notify-go: %v\n%s", err, out)
	}
	cfg := stationConfig(t, "ws-ex", "")
	// A port of its own that stays across the restart: the example
	// reconnects to the address it was given.
	cfg.HubURLs, cfg.Listen = nil, examplePort(t)
	s := runStation(t, cfg)
	setEnv(t, cfg.SessionsDir, cfg.StateDir)
	t.Setenv("PISYNC_NODE_ID", cfg.NodeID)

	cmd, lr, stderr := startNotify(t, bin, filepath.Join(cfg.StateDir, "client-context.json"))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	defer func() {
		if !exited {
			cmd.Process.Kill()
			<-done
		}
	}()
	waitUntil(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(stderr.String(), "notify-go: following the sessions"), stderr.String()
	})

	s.stop()
	sid := writeWithPi(t, s) // stored when the daemon starts again, while the example is away
	s.start()
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Fatalf("notify-go: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("notify-go printed %d of the 2 turns written while the daemon was down, 60 s after its restart\n%s",
			len(lr.get()), stderr.String())
	}
	wantTurns(t, lr.get(), sid)
}

// startNotify starts notify-go's binary bin with the client context
// creds, to stop after two turns, its output read line by line and its
// stderr kept.
func startNotify(t *testing.T, bin, creds string, args ...string) (*exec.Cmd, *lineReader, *testenv.LogBuffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-context", creds, "-count", "2"}, args...)...)
	lr, stderr, _ := startLines(t, cmd)
	return cmd, lr, stderr
}

// startLines starts cmd, its output read line by line until it ends (done
// is closed then) and its stderr kept.
func startLines(t *testing.T, cmd *exec.Cmd) (lr *lineReader, stderr *testenv.LogBuffer, done <-chan struct{}) {
	t.Helper()
	stderr = &testenv.LogBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lr = &lineReader{}
	read := make(chan struct{})
	go func() { lr.read(stdout); close(read) }()
	return lr, stderr, read
}

// examplePort is a loopback address free now, in the range the tests of
// this project may take (24500-24599).
func examplePort(t *testing.T) string {
	t.Helper()
	for p := 24500; p < 24600; p++ {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free port in 24500-24599")
	return ""
}

// TestExampleShell: examples/shell/turn-costs.sh (pisyncd tail --json and
// jq) prints the same lines as the Go example, live and from the start.
func TestExampleShell(t *testing.T) {
	testenv.Oracle(t)
	if _, err := exec.LookPath("jq"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("jq is not installed, and CI must run the shell example (.ci/run installs it)")
		}
		t.Skip("jq is not installed; skipping the shell example subscriber")
	}
	s := exampleDaemon(t)
	// `pisyncd` on the PATH is this test binary running Main.
	bindir := t.TempDir()
	wrapper := "#!/bin/sh\nPISYNC_TEST_AS_MAIN=1 exec " + os.Args[0] + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bindir, "pisyncd"), []byte(wrapper), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bindir+string(os.PathListSeparator)+os.Getenv("PATH"))
	script := filepath.Join(filepath.Dir(testenv.TestdataDir(t)), "examples", "shell", "turn-costs.sh")

	run := func(args ...string) (*lineReader, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
		// The pipeline is a process group: stopping it stops pisyncd
		// tail and jq.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
		lr, stderr, done := startLines(t, cmd)
		return lr, func() {
			cancel()
			<-done
			cmd.Wait()
			if s := stderr.String(); s != "" {
				t.Logf("turn-costs.sh stderr: %s", s)
			}
		}
	}

	// pisyncd failing fails the script (before: jq's status, 0).
	fail := exec.Command("bash", script)
	fail.Env = append(os.Environ(), "PISYNCD=false")
	if err := fail.Run(); err == nil {
		t.Error("turn-costs.sh exits 0 when pisyncd fails")
	}

	// Live. `pisyncd tail` prints nothing until an entry comes, so the
	// test appends turns of a probe session until one shows: from then
	// on the tail is subscribed, and pi writes.
	lr, stop := run()
	probe := filepath.Join(s.cfg.SessionsDir, "--probe--", "2026-11-30T00-00-00-000Z_probe-session.jsonl")
	os.MkdirAll(filepath.Dir(probe), 0o700)
	appendLine(t, probe, hdrLine("probe-session", "/probe"))
	parent := ""
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("the shell example printed nothing for 20 s of probe turns")
		}
		id := fmt.Sprintf("probe-%d", i)
		appendLine(t, probe, probeTurn(id, parent))
		parent = id
		if len(lr.get()) > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	sid := writeWithPi(t, s)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return len(linesOf(lr.get(), sid)) >= 2, strings.Join(lr.get(), "\n")
	})
	stop()
	wantTurns(t, linesOf(lr.get(), sid), sid)

	lr, stop = run("--from-start")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return len(linesOf(lr.get(), sid)) >= 2, strings.Join(lr.get(), "\n")
	})
	stop()
	wantTurns(t, linesOf(lr.get(), sid), sid)
}

// probeTurn is a hand-written assistant turn of no cost.
func probeTurn(id, parent string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return `{"type":"message","id":"` + id + `","parentId":` + p + `,"timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"probe"}],"provider":"p","model":"m","usage":{"cost":{"total":0}},"stopReason":"stop","timestamp":1}}`
}

// linesOf keeps the lines about session sid.
func linesOf(lines []string, sid string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, " session "+sid+" ") {
			out = append(out, l)
		}
	}
	return out
}

// TestListenExamplesAvoidHubPort: the workstation's PISYNC_LISTEN examples
// use a port a hub node on the same machine does not (before, they said
// 127.0.0.1:4222, PISYNC_HUB_LISTEN's default: followed on a hub's
// machine, the daemon could not listen).
func TestListenExamplesAvoidHubPort(t *testing.T) {
	f, _ := reflect.TypeOf(config.Hub{}).FieldByName("Listen")
	_, hubPort, err := net.SplitHostPort(f.Tag.Get("default"))
	if err != nil {
		t.Fatalf("the hub's client listener default: %v", err)
	}
	var usage strings.Builder
	if err := config.Usage(&usage); err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"pisyncd help": usage.String()}
	for _, root := range []string{"../../examples", "../../docs", "../../deploy", "../../README.md"} {
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(path)
				texts[path] = string(b)
			}
			return nil
		})
	}
	listen := regexp.MustCompile(`PISYNC_LISTEN=[^\s:]*:(\d+)|local subscribers, e\.g\. [^\s:]*:(\d+)`)
	found := 0
	for path, text := range texts {
		for _, m := range listen.FindAllStringSubmatch(text, -1) {
			found++
			if m[1] == hubPort || m[2] == hubPort {
				t.Errorf("%s: %q: the hub's client port (PISYNC_HUB_LISTEN)", path, m[0])
			}
		}
	}
	if found < 3 {
		t.Errorf("found %d PISYNC_LISTEN examples, want at least 3 (docs/SUBSCRIBING.md, examples/notify-go, pisyncd help)", found)
	}
}
