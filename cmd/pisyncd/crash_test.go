package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// daemonProc is pisyncd running as a child process (the test binary in
// PISYNC_TEST_AS_MAIN mode).
type daemonProc struct {
	cmd    *exec.Cmd
	stderr *lockedWriter // read it with String, safe while the process writes
	done   chan error
}

func startDaemonProc(t *testing.T, env []string) *daemonProc {
	t.Helper()
	return startDaemonProcArgs(t, env, nil, "run")
}

// startDaemonProcArgs starts `pisyncd args...`; stdout and stderr go to out
// when it is not nil, stderr to p.stderr otherwise.
func startDaemonProcArgs(t *testing.T, env []string, out *bytes.Buffer, args ...string) *daemonProc {
	t.Helper()
	return startProc(t, pisyncdCmd(env, args...), out)
}

// pisyncdCmd is `pisyncd args...` with env added: this test binary, made
// to run as pisyncd by its environment.
func pisyncdCmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), append([]string{"PISYNC_TEST_AS_MAIN=1"}, env...)...)
	return cmd
}

// startProc starts cmd (this test binary, made to run as pisyncd by its
// environment) as startDaemonProcArgs does; stderr goes to p.stderr unless
// cmd has one already.
func startProc(t *testing.T, cmd *exec.Cmd, out *bytes.Buffer) *daemonProc {
	t.Helper()
	p := &daemonProc{cmd: cmd, stderr: &lockedWriter{w: &bytes.Buffer{}}, done: make(chan error, 1)}
	if cmd.Stderr == nil {
		cmd.Stderr = p.stderr
	}
	if out != nil {
		w := &lockedWriter{w: out}
		cmd.Stdout, cmd.Stderr = w, w
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	// A test that fails before it stops the process must not leave it
	// running (a daemon and its tail outlived a failed test by an hour).
	// Once waited for, Kill does nothing.
	t.Cleanup(func() { cmd.Process.Kill() })
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// String is what was written so far.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// kill sends sig and waits for the process to exit; it returns how it did.
func (p *daemonProc) kill(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("daemon did not exit after %v", sig)
		return nil
	}
}

// sessionWriter appends pi-like entries to a few session files the way pi
// does (O_APPEND, one write per entry), sometimes splitting a line across
// two writes and sometimes writing a burst, until stopped.
type sessionWriter struct {
	dir   string
	files []string
	next  []int
	rng   *rand.Rand
}

func newSessionWriter(t *testing.T, dir string, sessions int, seed uint64) *sessionWriter {
	w := &sessionWriter{dir: dir, rng: rand.New(rand.NewPCG(seed, 1))}
	for i := 0; i < sessions; i++ {
		sid := fmt.Sprintf("0199aaaa-0000-7000-8000-%012d", i)
		path := filepath.Join(dir, fmt.Sprintf("--crash%d--", i), "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		hdr := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00.000Z","cwd":"/crash/%d"}`, sid, i)
		if err := os.WriteFile(path, []byte(hdr+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		w.files = append(w.files, path)
		w.next = append(w.next, 0)
	}
	return w
}

func (w *sessionWriter) line(i int) string {
	n := w.next[i]
	w.next[i]++
	parent := "null"
	if n > 0 {
		parent = fmt.Sprintf(`"e%07d"`, n-1)
	}
	pad := strings.Repeat("x", w.rng.IntN(2000))
	return fmt.Sprintf(`{"type":"message","id":"e%07d","parentId":%s,"timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"user","content":"line %d %s","timestamp":1}}`, n, parent, n, pad)
}

func (w *sessionWriter) step() error {
	i := w.rng.IntN(len(w.files))
	f, err := os.OpenFile(w.files[i], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	switch r := w.rng.IntN(20); {
	case r == 0: // a burst: a backlog published as atomic batches
		var b strings.Builder
		for k := 0; k < 40; k++ {
			b.WriteString(w.line(i) + "\n")
		}
		_, err = f.WriteString(b.String())
	case r < 4: // a line in two writes: a reader may see the partial line
		l := w.line(i) + "\n"
		cut := 1 + w.rng.IntN(len(l)-1)
		if _, err = f.WriteString(l[:cut]); err == nil {
			_, err = f.WriteString(l[cut:])
		}
	default:
		_, err = f.WriteString(w.line(i) + "\n")
	}
	return err
}

// TestSIGKILLExactlyOnce kills the daemon with SIGKILL at random moments
// while pi-like writers append, restarts it each time, and checks at the end
// that every session's subject holds exactly its file's lines, in file
// order: nothing lost, nothing twice.
func TestSIGKILLExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	sigkillExactlyOnce(t, 25, nil)
}

// TestSIGKILLExactlyOnceStoreCipher is TestSIGKILLExactlyOnce with the
// store encrypted at rest: nats-server recovers an encrypted store after a
// kill as it does a plain one, and no line is in the state dir in clear.
func TestSIGKILLExactlyOnceStoreCipher(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	state := sigkillExactlyOnce(t, 10, []string{"PISYNC_STORE_CIPHER=chachapoly"})
	for _, text := range []string{`"content":"line 3 `, `"cwd":"/crash/0"`} {
		if where := grepTree(state, text); len(where) > 0 {
			t.Errorf("%s is in the state dir in clear: %v", text, where)
		}
	}
}

// sigkillExactlyOnce is TestSIGKILLExactlyOnce with kills kills and env
// added; it returns the state dir, the daemon stopped.
func sigkillExactlyOnce(t *testing.T, kills int, extra []string) string {
	home := t.TempDir()
	sessions := filepath.Join(home, "sessions")
	state := filepath.Join(home, "state")
	env := []string{
		"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_NODE_ID=crash-node",
		"PISYNC_RESCAN_INTERVAL=200ms", "PISYNC_LOG_LEVEL=warn",
	}
	env = append(env, extra...)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	w := newSessionWriter(t, sessions, 4, seed)
	rng := rand.New(rand.NewPCG(seed, 2))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := w.step(); err != nil {
					writeErr = err
					return
				}
			}
		}
	}()

	for k := 0; k < kills; k++ {
		p := startDaemonProc(t, env)
		// Kill anywhere from start-up to well into steady state.
		wait := time.Duration(rng.IntN(400)) * time.Millisecond
		select {
		case err := <-p.done:
			t.Fatalf("daemon exited on its own (run %d): %v\n%s", k, err, p.stderr)
		case <-time.After(wait):
		}
		p.kill(t, syscall.SIGKILL)
	}
	cancel()
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}

	// A last, clean run catches up with everything.
	p := startDaemonProc(t, env)
	defer p.kill(t, syscall.SIGTERM) // before the caller looks at the state dir
	for _, path := range w.files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		var hdr struct{ ID string }
		json.Unmarshal([]byte(want[0]), &hdr)
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := controlEvents(state, hdr.ID)
			if err == nil && len(got) >= len(want) {
				if len(got) != len(want) {
					t.Fatalf("session %s: %d events for %d lines: duplicates", hdr.ID, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("session %s: event %d differs from line %d", hdr.ID, i, i)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s: %d of %d lines stored (err %v)\n%s", hdr.ID, len(got), len(want), err, p.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("session %s: %d lines, each stored exactly once", hdr.ID, len(want))
	}
	return state
}

// controlEvents reads a session's stored lines through the daemon's
// control socket.
func controlEvents(stateDir, sid string) ([]string, error) {
	resp, err := controlClient(stateDir).Get("http://pisyncd/events?session=" + sid)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e eventJSON
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, err
		}
		var raw bytes.Buffer
		if err := json.Compact(&raw, e.Entry); err != nil {
			return nil, err
		}
		out = append(out, raw.String())
	}
	return out, sc.Err()
}
