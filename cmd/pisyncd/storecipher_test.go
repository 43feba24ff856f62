package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestStoreCipherProcess: the daemon with PISYNC_STORE_CIPHER keeps a
// line's text out of every byte of the state dir, says "encrypted" in
// status (and never the key), reads its store without a daemon too, and
// refuses to start on it with the cipher off, saying why.
func TestStoreCipherProcess(t *testing.T) {
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	env := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_LOG_LEVEL=warn", "PISYNC_STORE_CIPHER=aes"}
	p := startDaemonProc(t, env)

	const marker = "at-rest-marker-5d1f0c2a9e"
	path := filepath.Join(sessions, "--p--", "2026-11-30T00-00-00-000Z_sid-1.jsonl")
	os.MkdirAll(filepath.Dir(path), 0o700)
	appendLine(t, path, hdrLine("sid-1", "/p"))
	appendLine(t, path, msgLine("e1", "", marker))

	var st Status
	waitUntil(t, 20*time.Second, func() (bool, string) {
		var out bytes.Buffer
		if code := runCmd(t, env, &out, "status", "--json"); code != 0 {
			return false, "status failed: " + out.String()
		}
		st = Status{}
		json.Unmarshal(out.Bytes(), &st)
		return st.Stream.Messages == 2, out.String()
	})
	if st.StoreCipher != "aes" {
		t.Errorf("status --json storeCipher %q", st.StoreCipher)
	}
	key, err := os.ReadFile(filepath.Join(state, "store-key"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	runCmd(t, env, &out, "status")
	if !strings.Contains(out.String(), "encrypted, cipher aes") {
		t.Errorf("status text lacks the store cipher:\n%s", out.String())
	}
	if strings.Contains(out.String(), strings.TrimSpace(string(key))) || strings.Contains(p.stderr.String(), strings.TrimSpace(string(key))) {
		t.Error("the store key is in status or the log")
	}
	p.kill(t, syscall.SIGTERM)
	if where := grepTree(state, marker); len(where) > 0 {
		t.Errorf("the line is in the state dir in clear: %v", where)
	}

	// Without a daemon, events opens the encrypted store itself.
	out.Reset()
	if code := runCmd(t, env, &out, "events", "sid-1", "--json"); code != 0 || !strings.Contains(out.String(), marker) {
		t.Errorf("events without daemon: exit %d: %s", code, out.String())
	}
	// The cipher off: refused, naming the cause and the fix.
	off := append(append([]string{}, env...), "PISYNC_STORE_CIPHER=off")
	out.Reset()
	if code := runCmd(t, off, &out, "run"); code == 0 || !strings.Contains(out.String(), "is encrypted at rest") || !strings.Contains(out.String(), "PISYNC_STORE_CIPHER=aes") {
		t.Errorf("run with the cipher off: exit %d: %s", code, out.String())
	}
	// The session files themselves are pi's, in clear as pi wrote them
	// (the search works).
	if where := grepTree(sessions, marker); len(where) != 1 {
		t.Errorf("the marker in the sessions dir: %v", where)
	}
}

// TestHubStoreCipher: PISYNC_HUB_STORE_CIPHER keeps lines sent without
// end-to-end encryption out of the hub's disk; the hub restarts on its
// key and still serves them. (With end-to-end encryption the hub holds
// only ciphertext anyway: TestEncryptedReplication.)
func TestHubStoreCipher(t *testing.T) {
	hub := &testHub{t: t, dir: t.TempDir(), leaf: testenv.FreeAddr(t), storeCipher: "chachapoly"}
	hub.start()
	t.Cleanup(hub.stop)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")

	marker := randomHex(t, 48)
	sid := "0199eeee-0000-7000-8000-" + randomHex(t, 12)
	p := filepath.Join(a.cfg.SessionsDir, "--sec-x--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	os.MkdirAll(filepath.Dir(p), 0o700)
	appendLine(t, p, hdrLine(sid, "/sec/x"))
	appendLine(t, p, msgLine("e0000001", "", marker))
	want := fileText(p)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return fileText(e2eFile(b, sid)) == want, "B has not A's session yet"
	})
	hub.stop()
	if hits := grepTree(hub.dir, marker); len(hits) > 0 {
		t.Errorf("the hub's store holds the marker in clear: %v", hits)
	}
	if hits := grepTree(b.cfg.StateDir, marker); len(hits) == 0 {
		t.Fatal("the marker is not in B's plain store either: the search finds nothing")
	}
	// The cipher off on the encrypted store: refused, saying which setting.
	if srv, err := StartHub(context.Background(), &config.Hub{
		Name: "hub-1", StateDir: hub.dir, LeafListen: hub.leaf, Replicas: 1, MaxStore: 1 << 30, Open: true,
	}, slog.New(slog.DiscardHandler)); err == nil {
		srv.Close()
		t.Fatal("the hub started on its encrypted store with the cipher off")
	} else if !strings.Contains(err.Error(), "PISYNC_HUB_STORE_CIPHER=chachapoly") {
		t.Errorf("hub with the cipher off: %v", err)
	}
	hub.start()
	c := newStation(t, "ws-c", hub.url(), "")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return fileText(e2eFile(c, sid)) == want, "C has not copied the session from the restarted hub"
	})
}
