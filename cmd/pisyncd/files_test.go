package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemonSurvivesOddFiles runs pisyncd as a real process over a
// sessions dir that holds, next to ordinary sessions, a session whose id
// is 5,000 characters long (its subject would be longer than the server's
// 4 KiB protocol line: it took the daemon's only connection down), a FIFO
// named *.jsonl (a plain open blocks on it for ever) and a unix socket
// named *.jsonl. Every ordinary session is published, status answers all
// along, queries naming the long id are answered with an error, files
// added later are handled, SIGTERM stops the daemon at once, and it
// starts again with all of them present.
func TestDaemonSurvivesOddFiles(t *testing.T) {
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	env := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_LOG_LEVEL=warn",
		"PISYNC_RESCAN_INTERVAL=200ms", "PISYNC_SHUTDOWN_TIMEOUT=30s"}
	dir := filepath.Join(sessions, "--p--")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("L", 5000)
	appendLine(t, filepath.Join(dir, "long.jsonl"), hdrLine(long, "/p"))
	appendLine(t, filepath.Join(dir, "long.jsonl"), msgLine("l1", "", "never published"))
	if err := syscall.Mkfifo(filepath.Join(dir, "x.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "y.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var sids []string
	write := func(n int, prefix string) {
		for i := range n {
			sid := fmt.Sprintf("0199%s-0000-7000-8000-%012d", prefix, i)
			path := filepath.Join(dir, "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
			appendLine(t, path, hdrLine(sid, "/p"))
			appendLine(t, path, msgLine("e1", "", "hello"))
			sids = append(sids, sid)
		}
	}
	write(16, "aaaa")

	status := func() Status {
		t.Helper()
		var st Status
		waitUntil(t, 20*time.Second, func() (bool, string) {
			var out bytes.Buffer
			if code := runCmd(t, env, &out, "status", "--json"); code != 0 {
				return false, "status failed: " + out.String()
			}
			st = Status{}
			return json.Unmarshal(out.Bytes(), &st) == nil, out.String()
		})
		return st
	}
	published := func(want int64) {
		t.Helper()
		waitUntil(t, 30*time.Second, func() (bool, string) {
			st := status()
			return st.Stream.Messages == uint64(want), fmt.Sprintf("stream holds %d messages, want %d", st.Stream.Messages, want)
		})
	}

	p := startDaemonProc(t, env)
	published(32)
	st := status()
	if got := st.Tailer.FilesIgnoredBy; got["session-id-too-long"] != 1 || got["not-a-regular-file"] != 2 {
		t.Fatalf("ignored %v", got)
	}
	// Queries naming the long id get an error; the daemon goes on.
	for _, args := range [][]string{{"events", long}, {"context", long}, {"tail", "--session", long}} {
		var out bytes.Buffer
		if code := runCmd(t, env, &out, args...); code == 0 || !strings.Contains(out.String(), "too long") {
			t.Errorf("%s <5000 characters>: exit %d: %.300s", args[0], code, out.String())
		}
	}
	// More of everything while it runs.
	if err := syscall.Mkfifo(filepath.Join(dir, "later.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	appendLine(t, filepath.Join(dir, "long2.jsonl"), hdrLine(long+"2", "/p"))
	write(4, "bbbb")
	published(40)
	if st := status(); st.Tailer.FilesIgnored != 5 || st.Tailer.PublishErrors != 0 {
		t.Fatalf("status %+v", st.Tailer)
	}

	start := time.Now()
	p.kill(t, syscall.SIGTERM)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("exit %d after %v\n%s", code, time.Since(start), p.stderr)
	}

	// A restart with every odd file present.
	p = startDaemonProc(t, env)
	appendLine(t, filepath.Join(dir, "2026-11-30T00-00-00-000Z_"+sids[0]+".jsonl"), msgLine("e2", "e1", "after restart"))
	published(41)
	p.kill(t, syscall.SIGTERM)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderr)
	}
}
