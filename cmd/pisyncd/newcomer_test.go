package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pisyncd/pisyncd/internal/cli"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// mainIn runs one command in this process against env's state, as a
// person at a shell would, and returns its exit code, stdout and stderr.
func mainIn(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// setEnv points the commands at a home of their own.
func setEnv(t *testing.T, sessions, state string) {
	t.Setenv("PISYNC_SESSIONS_DIR", sessions)
	t.Setenv("PISYNC_STATE_DIR", state)
	t.Setenv("PISYNC_NODE_ID", "")
	t.Setenv("PISYNC_HUB_URLS", "")
}

// TestHelpAndBadFlags: -h or --help on any subcommand prints its usage and
// flags and exits 0; a bad flag or argument is named, with the usage, and
// exits 2; `version` and `--version` answer. (Before, -h exited 2 and a
// bad flag printed only the usage.)
func TestHelpAndBadFlags(t *testing.T) {
	home := t.TempDir()
	setEnv(t, filepath.Join(home, "sessions"), filepath.Join(home, "state"))
	for _, args := range [][]string{
		{"run", "-h"}, {"status", "-h"}, {"events", "--help"}, {"context", "-h"}, {"ls", "--help"},
		{"tail", "-h"}, {"erase", "-h"}, {"service", "--help"}, {"hub", "add-node", "-h"},
		{"hub", "certs", "--help"}, {"hub", "dev-init", "-h"}, {"hub", "erase", "-h"}, {"hub", "upgrade", "-h"},
		{"hub", "config", "-h"}, // before: printed the configuration
	} {
		code, out, errOut := mainIn(t, args...)
		if code != 0 || !strings.HasPrefix(out, "usage: pisyncd") || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	// help COMMAND is the command's own help; help of no command is a
	// usage error (both printed the whole help with exit 0: a newcomer
	// probe, 2026-12-07).
	if code, out, _ := mainIn(t, "help", "status"); code != 0 || !strings.HasPrefix(out, "usage: pisyncd status [--json]") {
		t.Errorf("help status: exit %d\n%s", code, out)
	}
	if code, out, errOut := mainIn(t, "help", "bogus"); code != 2 || out != "" || !strings.Contains(errOut, `unknown command "bogus"`) {
		t.Errorf("help bogus: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, again := range []string{"help", "-h", "--help"} {
		if code, out, _ := mainIn(t, "help", again); code != 0 || !strings.HasPrefix(out, usageText) {
			t.Errorf("help %s: exit %d\n%.200s", again, code, out)
		}
	}
	// Its flags as the usage line writes them (cli.TestHelpShowsDoubleDash).
	if _, out, _ := mainIn(t, "status", "-h"); !strings.Contains(out, "\n  --json\n") {
		t.Errorf("status -h shows its flag not as --json:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "-x"}, "ls: flag provided but not defined: -x\nusage: pisyncd ls [--json]"},
		{[]string{"status", "--jsn"}, "status: flag provided but not defined: -jsn"},
		{[]string{"context", "--leaf"}, "context: flag needs an argument: -leaf"},
		{[]string{"events"}, "events: missing argument\nusage: pisyncd events SESSION-ID [--json]"},
		{[]string{"events", "a", "b"}, `events: too many arguments: ["b"]`},
		{[]string{"tail", "extra"}, `tail takes no arguments, got ["extra"]`},
		{[]string{"tail", "--session", ""}, "tail: the session id is empty"}, // before: followed every session
		{[]string{"key", "token", ""}, "key token: the session id is empty"},
		{[]string{"service", "--frobnicate"}, "service: flag provided but not defined: --frobnicate"},
		{[]string{"hub", "certs", "/tmp/x"}, "certs: --hosts is required"},
		{[]string{"hub", "certs", "/tmp/x", "--hosts", "hub.lan,bad host,*.x"}, `--hosts "bad host": want host names`}, // before: written into the certificate
		{[]string{"hub", "dev-init", "/tmp/x", "--hosts", "-x", "--nodes", "a"}, `--hosts "-x": want host names`},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"hub", "config", "extra"}, `config takes no arguments, got ["extra"]`}, // before: ignored
		{[]string{"hub", "config", "--bogus"}, `config: flag provided but not defined: -bogus`},
		{[]string{"search", "zebra", "--limit", "0"}, `search: --limit "0": want a number from 1 to 100`},
		{[]string{"search", "zebra", "--after=x"}, `search: --after "x": want a number from 0 to 1000`},
	} {
		code, _, errOut := mainIn(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errOut, c.want)
		}
	}
	for _, v := range []string{"version", "--version"} {
		code, out, _ := mainIn(t, v)
		if code != 0 || !regexp.MustCompile(`^pisyncd \S+ \(.*go1\.\d+.*\)\n$`).MatchString(out) {
			t.Errorf("%s: exit %d, %q", v, code, out)
		}
		// --json gives the build as one object (it was refused as an
		// argument, 2026-12-07).
		code, out, errOut := mainIn(t, v, "--json")
		var b cli.BuildInfo
		if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil || b.Version == "" || !strings.HasPrefix(b.GoVersion, "go1.") {
			t.Errorf("%s --json: exit %d, stdout %q, stderr %q (%v)", v, code, out, errOut, err)
		}
	}
}

// TestCommandsWithoutStore: on a machine where the daemon never ran, ls
// says there is nothing yet and events, context, erase name what is
// missing; none of them creates a state dir, a node id or a store. (Before,
// ls made all three, and a missing file was looked up as a session id;
// erase made them until 2026-12-03.)
func TestCommandsWithoutStore(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, "state")
	setEnv(t, filepath.Join(home, "sessions"), state)
	if code, out, errOut := mainIn(t, "ls"); code != 0 || !strings.Contains(out, "no sessions: pisyncd has not run here yet") {
		t.Errorf("ls: exit %d, %q %q", code, out, errOut)
	}
	if code, out, _ := mainIn(t, "ls", "--json"); code != 0 || out != "[]\n" {
		t.Errorf("ls --json: exit %d, %q", code, out)
	}
	// --json before the command is the command's own (it was "unknown
	// command \"--json\"").
	if code, out, errOut := mainIn(t, "--json", "ls"); code != 0 || out != "[]\n" {
		t.Errorf("--json ls: exit %d, %q %q", code, out, errOut)
	}
	missing := filepath.Join(home, "nosuch.jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "UNKNOWN"}, `events: no session "UNKNOWN": pisyncd has not run here yet`},
		{[]string{"context", "UNKNOWN"}, `context: no session "UNKNOWN": pisyncd has not run here yet`},
		{[]string{"context", missing}, "context: " + missing + ": no such file"},
		{[]string{"context", home}, "is a folder"},
		{[]string{"erase", "UNKNOWN"}, `erase: no session "UNKNOWN": pisyncd has not run here yet (its files, if any, were never published`},
	} {
		code, _, errOut := mainIn(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errOut, c.want)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the commands created the state dir: %v", err)
	}
}

// TestCommandsAgainstDaemon: against a running daemon, an unknown session
// id and a missing file each get their own plain answer (exit 1, no HTTP
// status text, no doubled prefixes); status and /metrics say which build
// runs; ls is narrow and counts nodes the same way for one or several.
func TestCommandsAgainstDaemon(t *testing.T) {
	cfg := stationConfig(t, "ws-new", "")
	cfg.HubURLs = nil
	s := runStation(t, cfg)
	setEnv(t, cfg.SessionsDir, cfg.StateDir)
	t.Setenv("PISYNC_NODE_ID", "ws-new")
	sid := "0198c0de-0000-7000-8000-000000000001"
	writeSession(t, s, sid, 2)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, _ := s.d.status(t.Context())
		return st.Projection.Applied >= 3, fmt.Sprintf("%+v", st.Projection)
	})

	missing := filepath.Join(t.TempDir(), "nosuch.jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "UNKNOWN"}, `pisyncd: events: no session "UNKNOWN" on this machine (pisyncd ls lists them)` + "\n"},
		{[]string{"context", "UNKNOWN"}, `pisyncd: context: no session "UNKNOWN" on this machine (pisyncd ls lists them)` + "\n"},
		{[]string{"context", missing}, "pisyncd: context: " + missing + ": no such file\n"},
	} {
		code, out, errOut := mainIn(t, c.args...)
		if code != 1 || errOut != c.want || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", c.args, code, out, errOut, c.want)
		}
	}
	if code, out, _ := mainIn(t, "events", sid); code != 0 || strings.Count(out, "\n") != 3 {
		t.Errorf("events %s: exit %d\n%s", sid, code, out)
	}
	// Output that cannot be written (a full disk, a closed pipe) fails.
	var errOut bytes.Buffer
	if code := Main([]string{"events", sid}, failingWriter{}, &errOut); code != 1 || !strings.Contains(errOut.String(), "events: write: no space left on device") {
		t.Errorf("events into a full disk: exit %d, stderr %q", code, errOut.String())
	}

	code, out, _ := mainIn(t, "status")
	if code != 0 || !regexp.MustCompile(`(?m)^version\s+\S+ \(.*go1\.`).MatchString(out) {
		t.Errorf("status text lacks the version: exit %d\n%s", code, out)
	}
	if !regexp.MustCompile(`(?m)^up since\s+\S+ \(the counts below are since then; the stream's are all time\)$`).MatchString(out) {
		t.Errorf("status text does not say its counts are since the start:\n%s", out)
	}
	code, out, _ = mainIn(t, "status", "--json")
	var st Status
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Build.Version == "" || st.Build.GoVersion == "" {
		t.Errorf("status --json: exit %d, %v, build %+v", code, err, st.Build)
	}
	mfs, err := s.d.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "pisyncd_build_info" && len(mf.Metric) == 1 && mf.Metric[0].GetGauge().GetValue() == 1 {
			for _, l := range mf.Metric[0].Label {
				found = found || (l.GetName() == "version" && l.GetValue() == st.Build.Version)
				// A test binary has no VCS stamp: whether its tree was
				// modified is not known, and not said "false".
				if l.GetName() == "modified" && st.Build.Revision == "" && l.GetValue() != "unknown" {
					t.Errorf("build_info says modified=%q of a build without a revision", l.GetValue())
				}
			}
		}
	}
	if !found {
		t.Errorf("/metrics has no pisyncd_build_info{version=%q} 1", st.Build.Version)
	}

	code, out, _ = mainIn(t, "ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[1], sid) {
		t.Fatalf("ls: exit %d\n%s", code, out)
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 110 {
			t.Errorf("ls line of %d columns: %q", n, l)
		}
	}
	if f := strings.Fields(lines[1]); f[len(f)-2] != "1" || f[len(f)-1] != "/sec" {
		t.Errorf("ls: NODES is not the count 1, or the cwd is missing: %q", lines[1])
	}
}

// TestStatusReachability: the text says what --json says, the forwarder's
// and the downloader's connection each. (Before, the text showed one
// "hub reachable" that was either of them.)
func TestStatusReachability(t *testing.T) {
	h := startTestHub(t)
	s := newStation(t, "ws-reach", h.url(), "")
	setEnv(t, s.cfg.SessionsDir, s.cfg.StateDir)
	t.Setenv("PISYNC_NODE_ID", "ws-reach")
	writeSession(t, s, "reach-session", 1)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, _ := s.d.status(t.Context())
		return st.Forwarder.Connected && st.Downloader.Connected, fmt.Sprintf("%+v %+v", st.Forwarder, st.Downloader)
	})
	code, out, _ := mainIn(t, "status")
	if code != 0 || !regexp.MustCompile(`(?m)^hub reachable\s+forwarder yes, downloader yes$`).MatchString(out) {
		t.Errorf("status: exit %d\n%s", code, out)
	}
}

// TestStatusReachableIdle: a workstation with nothing to forward reports
// its forwarder reaching the hub once the hub answered it. (Before, a new
// machine, or one whose lines were all on the hub, showed "forwarder no"
// beside a link that was up, until its first line went.)
func TestStatusReachableIdle(t *testing.T) {
	h := startTestHub(t)
	s := newStation(t, "ws-idle", h.url(), "")
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, _ := s.d.status(t.Context())
		return st.Forwarder.Connected && st.Downloader.Connected && st.Forwarder.Forwarded == 0, fmt.Sprintf("%+v %+v", st.Forwarder, st.Downloader)
	})
}

// TestRunningLineNamesHub: the start's "pisyncd running" names the hub a
// workstation replicates through, its credentials redacted. (Before, a
// workstation's log said nothing of the hub until something failed.)
func TestRunningLineNamesHub(t *testing.T) {
	cfg := stationConfig(t, "ws-line", "nats://ann:secret@127.0.0.1:1")
	_, log := loggedStationAt(t, cfg, slog.LevelInfo)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(log.String(), `msg="pisyncd running"`), log.String()
	})
	line := regexp.MustCompile(`(?m)^.*msg="pisyncd running".*$`).FindString(log.String())
	if !strings.Contains(line, " hub=nats://REDACTED@127.0.0.1:1") || strings.Contains(line, "secret") {
		t.Errorf("the running line: %s", line)
	}
}

// TestModelName: the context's model reads provider/model, not pi's JSON.
func TestModelName(t *testing.T) {
	for raw, want := range map[string]string{
		`{"provider":"anthropic","modelId":"claude-sonnet-4-5"}`: "anthropic/claude-sonnet-4-5",
		`{"modelId":"gpt-5"}`: "gpt-5",
		`"gpt-5"`:             "gpt-5",
		`null`:                "",
		`{}`:                  "", // printed "model {}"
		`{"provider":"x"}`:    "x",
	} {
		if got := cli.ModelName(json.RawMessage(raw)); got != want {
			t.Errorf("modelName(%s) = %q, want %q", raw, got, want)
		}
	}
	var out bytes.Buffer
	if err := contextFileCommand([]string{filepath.Join("..", "..", "testdata", "conformance", "basic-linear.jsonl")}, &out); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(out.String(), "\n"); !strings.Contains(first, "model openai/gpt-5, thinking off") {
		t.Errorf("context: %q", first)
	}
}

// TestLogStartsWithVersion: the daemon's first log line names the build.
func TestLogStartsWithVersion(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "run")
	cmd.Env = append(os.Environ(), "PISYNC_TEST_AS_MAIN=1", "PISYNC_SESSIONS_DIR="+filepath.Join(home, "sessions"),
		"PISYNC_STATE_DIR="+filepath.Join(home, "state"), "PISYNC_LOG_LEVEL=info", "PISYNC_LOG_FORMAT=text")
	var log testenv.LogBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("the daemon did not stop after SIGTERM")
		}
	}()
	waitUntil(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(log.String(), `msg="pisyncd running"`), log.String()
	})
	first, _, _ := strings.Cut(log.String(), "\n")
	if !regexp.MustCompile(`level=INFO msg="pisyncd starting" version=\S+ go=go1\.`).MatchString(first) {
		t.Errorf("first log line: %q", first)
	}
}

// failingWriter is output on a full disk.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestErrorsUnderJSON: a command given --json fails with one JSON object
// on stderr, so a script reading its output as JSON can read its failure
// too (it met a plain "pisyncd: ..." line, 2026-12-07); without --json
// the error is for a person, as before.
func TestErrorsUnderJSON(t *testing.T) {
	home := t.TempDir()
	setEnv(t, filepath.Join(home, "sessions"), filepath.Join(home, "state"))
	for _, c := range []struct {
		args  []string
		exit  int
		usage string
	}{
		{[]string{"status", "--json"}, 1, ""},
		{[]string{"ls", "--json", "--bogus"}, 2, "pisyncd ls [--json]"},
		{[]string{"events", "--json"}, 2, "pisyncd events SESSION-ID [--json]"},
		{[]string{"search", "--json", "--limit", "x", "q"}, 2, "pisyncd search"},
	} {
		code, out, errOut := mainIn(t, c.args...)
		var got struct {
			Error, Usage string
			Exit         int
		}
		if err := json.Unmarshal([]byte(errOut), &got); err != nil || code != c.exit || got.Exit != c.exit ||
			got.Error == "" || !strings.HasPrefix(got.Usage, c.usage) || (c.usage == "" && got.Usage != "") || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q (%v)", c.args, code, out, errOut, err)
		}
	}
	if code, _, errOut := mainIn(t, "status"); code != 1 || !strings.HasPrefix(errOut, "pisyncd: pisyncd is not running") {
		t.Errorf("status without --json: exit %d, stderr %q", code, errOut)
	}
}
