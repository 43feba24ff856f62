package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/pisyncd/pisyncd/config"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHTTPConnectionsBounded: connections to the web listener, which every
// local user reaches, hold at most maxHTTPConns of the daemon's file
// descriptors, and one whose request lacks the token (or asks /healthz)
// is closed with its answer; publishing goes on meanwhile. (Before, idle
// kept-alive connections were never closed nor bounded: 20,000 of them
// stalled publishing with "too many open files".)
func TestHTTPConnectionsBounded(t *testing.T) {
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	addr := testenv.FreeAddr(t)
	env := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_HTTP_ADDR=" + addr, "PISYNC_LOG_LEVEL=warn", "GOMEMLIMIT="}
	p := startDaemonProc(t, env)
	defer p.kill(t, syscall.SIGTERM)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200 && resp.Close, fmt.Sprintf("healthz %d, close %v", resp.StatusCode, resp.Close)
	})
	fds := procFDs(t, p)
	before := fds()

	// Connections that send a request without the token: answered and
	// closed by the daemon.
	for range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /api/sessions HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Fatalf("a request without the token: %v %v", resp, err)
		}
		c.Close()
	}
	// Connections that stay open without a word: no more than the bound
	// are taken.
	defer closeAll(holdConns(t, "tcp", addr, maxHTTPConns, fds, before))

	// The daemon publishes meanwhile.
	writeOneSession(t, sessions)
	waitPublished(t, env, 2)
}

// TestControlConnectionsBounded: the control socket holds at most
// maxControlConns connections, as the web port does. A probe on
// 2026-12-06 held 20,000 there (reopened as the header timeout closed
// them): the daemon ran out of file descriptors, a new line took 5.4 s to
// be published and status failed. Proves that connections past the bound
// take no descriptor, and that a line is published meanwhile.
func TestControlConnectionsBounded(t *testing.T) {
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	env := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_LOG_LEVEL=warn", "GOMEMLIMIT="}
	p := startDaemonProc(t, env)
	defer p.kill(t, syscall.SIGTERM)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		var out bytes.Buffer
		return runCmd(t, env, &out, "status", "--json") == 0, out.String()
	})
	fds := procFDs(t, p)
	conns := holdConns(t, "unix", filepath.Join(state, config.ControlSocket), maxControlConns, fds, fds())
	defer func() { closeAll(conns) }()

	writeOneSession(t, sessions)
	closeAll(conns) // status needs the socket
	conns = nil
	waitPublished(t, env, 2)
}

// procFDs counts the open file descriptors of the daemon process p.
func procFDs(t *testing.T, p *daemonProc) func() int {
	return func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
		if err != nil {
			t.Skipf("no /proc: %v", err)
		}
		return len(ents)
	}
}

// holdConns opens bound+100 connections to addr that say nothing, and
// checks that the daemon (its descriptors fds, before of them before)
// takes about bound of them, no more. It returns them, open.
func holdConns(t *testing.T, network, addr string, bound int, fds func() int, before int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range bound + 100 {
		c, err := net.Dial(network, addr)
		if err != nil {
			closeAll(conns)
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	waitUntil(t, 20*time.Second, func() (bool, string) {
		n := fds() - before
		return n >= bound-5, fmt.Sprintf("%d descriptors taken for %d connections", n, len(conns))
	})
	if n := fds() - before; n > bound+5 {
		t.Errorf("%d descriptors taken for %d connections, bound %d", n, len(conns), bound)
	}
	return conns
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// writeOneSession writes a session of two lines into sessions.
func writeOneSession(t *testing.T, sessions string) {
	path := filepath.Join(sessions, "--p--", "2026-11-30T00-00-00-000Z_sid-1.jsonl")
	os.MkdirAll(filepath.Dir(path), 0o700)
	appendLine(t, path, hdrLine("sid-1", "/p"))
	appendLine(t, path, msgLine("e1", "", "hello"))
}

// waitPublished waits until the daemon of env says it published n lines.
func waitPublished(t *testing.T, env []string, n int64) {
	t.Helper()
	waitUntil(t, 20*time.Second, func() (bool, string) {
		var out bytes.Buffer
		if runCmd(t, env, &out, "status", "--json") != 0 {
			return false, out.String()
		}
		var st Status
		json.Unmarshal(out.Bytes(), &st)
		return st.Tailer.LinesPublished == n, out.String()
	})
}
