package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// statusWithin asks the daemon for its status through the control socket,
// as `pisyncd status` does, and fails when it takes longer than d.
func statusWithin(stateDir string, d time.Duration) (Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	resp, err := getControl(ctx, &config.Config{StateDir: stateDir}, "/status")
	if err != nil {
		return Status{}, err
	}
	defer resp.Body.Close()
	var st Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// getControlPath returns the body of a GET on the control socket, whatever
// its HTTP status.
func getControlPath(stateDir, path string) (string, error) {
	resp, err := controlClient(stateDir).Get("http://pisyncd" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// runStationLogs is runStation with the station's log also kept in logs.
func runStationLogs(t *testing.T, cfg *config.Config, logs *testenv.LogBuffer) *station {
	s := &station{t: t, name: cfg.NodeID, cfg: cfg, logs: logs}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// writeLoop runs w's steps every tick until stop is called, which returns
// the first write error.
func writeLoop(w *sessionWriter, tick time.Duration) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var err error
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err = w.step(); err != nil {
					return
				}
			}
		}
	}()
	return func() error {
		cancel()
		wg.Wait()
		return err
	}
}

// streamMatchesFiles reports whether every session's subject holds exactly
// its file's lines, in file order: nothing lost, nothing twice.
func streamMatchesFiles(stateDir string, files []string) (ok bool, why string, lines int) {
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error(), lines
		}
		want := splitLines(string(data))
		var hdr struct{ ID string }
		json.Unmarshal([]byte(want[0]), &hdr)
		got, err := controlEvents(stateDir, hdr.ID)
		if err != nil {
			return false, fmt.Sprintf("session %s: %v", hdr.ID, err), lines
		}
		if len(got) > len(want) {
			return false, fmt.Sprintf("session %s: %d events for %d lines: duplicates", hdr.ID, len(got), len(want)), lines
		}
		for i := range got {
			if got[i] != want[i] {
				return false, fmt.Sprintf("session %s: event %d differs from line %d", hdr.ID, i, i), lines
			}
		}
		if len(got) < len(want) {
			return false, fmt.Sprintf("session %s: %d of %d lines stored", hdr.ID, len(got), len(want)), lines
		}
		lines += len(want)
	}
	return true, "", lines
}

// TestStateDirDiskFull fills the real disk under A's state dir while pi-like
// writers append to three sessions, then frees it. A must keep answering
// status, report the full store within two seconds, retry the failing files
// with back-off, and, once space is back, publish every line exactly once
// without a restart; the forwarder and B's copy catch up by themselves.
func TestStateDirDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	hub := startTestHub(t)
	cfg := stationConfig(t, "full-a", hub.url())
	cfg.LogLevel = "info" // the recovery is logged at info
	testenv.Tmpfs(t, cfg.StateDir, 16<<20)
	logs := &testenv.LogBuffer{}
	a := runStationLogs(t, cfg, logs)
	b := newStation(t, "full-b", hub.url(), "")

	w := newSessionWriter(t, cfg.SessionsDir, 3, uint64(time.Now().UnixNano()))
	stop := writeLoop(w, 20*time.Millisecond)
	defer stop()
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, err := statusWithin(cfg.StateDir, 2*time.Second)
		return err == nil && st.Tailer.LinesPublished > 50, fmt.Sprintf("%+v %v", st.Tailer, err)
	})

	free := testenv.Fill(t, cfg.StateDir)
	full := time.Now()
	var noticed time.Duration
	errorsAtFull := a.d.tailer.Stats().PublishErrors
	// Status answers all along and comes to report the full store. The
	// deadlines are a hang's bounds, not timings: on an idle machine it
	// shows within a few hundred milliseconds (the store watch's probe).
	for noticed == 0 || time.Since(full) < 6*time.Second {
		st, err := statusWithin(cfg.StateDir, 10*time.Second)
		if err != nil {
			t.Fatalf("status did not answer while the disk is full (%v after): %v", time.Since(full), err)
		}
		if noticed == 0 && st.Store != nil && st.Store.State == embedded.StoreFailing &&
			strings.Contains(st.Store.Error, "no space left") && strings.Contains(st.Tailer.LastError, "no space left") {
			noticed = time.Since(full)
			t.Logf("status reported the full disk %v after it filled", noticed)
		}
		if noticed == 0 && time.Since(full) > 30*time.Second {
			t.Fatalf("status does not report the full disk 30 s after it filled: store %+v, lastError %q", st.Store, st.Tailer.LastError)
		}
		time.Sleep(100 * time.Millisecond) // a user's pace, not synchronisation
	}
	window := time.Since(full)
	attempts := a.d.tailer.Stats().PublishErrors - errorsAtFull
	retrying := a.d.tailer.Retrying()
	// Three files, 6 s or more: the back-off (50 ms doubling, 10 s at most)
	// allows about seven attempts a file in 6 s; the writers appended
	// ~300 times meanwhile.
	if limit := 3 * (10 + int(window/(10*time.Second))); attempts > int64(limit) {
		t.Errorf("%d failed publishes in %v for 3 files: the back-off does not hold", attempts, window.Round(time.Millisecond))
	}
	// One warning a file, and one more each time a file was published
	// between failures: the store watch's probe file, written and removed,
	// can leave a publish room on the full disk for a moment (seen in CI:
	// a file published again after 233 ms and failing at the next line).
	logged := logs.String()
	if c, again := strings.Count(logged, "session file not published; retrying"), strings.Count(logged, "session file published again"); c > 3+again {
		t.Errorf("%d 'not published' warnings for 3 files, %d of them published again in between", c, again)
	}
	if c := strings.Count(logs.String(), "the event store cannot write"); c != 1 {
		t.Errorf("%d 'event store cannot write' errors logged, want 1", c)
	}
	if resp, err := getControlPath(cfg.StateDir, "/healthz"); err != nil || !strings.Contains(resp, "event store failing") {
		t.Errorf("healthz while the store is failing: %q %v", resp, err)
	}
	var out bytes.Buffer
	if code := runCmd(t, []string{"PISYNC_STATE_DIR=" + cfg.StateDir, "PISYNC_SESSIONS_DIR=" + cfg.SessionsDir}, &out, "status"); code != 0 ||
		!strings.Contains(out.String(), "event store") || !strings.Contains(out.String(), "failing since") ||
		!strings.Contains(out.String(), "no space left") || !strings.Contains(out.String(), "(FULL)") {
		t.Errorf("pisyncd status while the store is failing (exit %d):\n%s", code, out.String())
	}
	t.Logf("full store reported after %v; %d failed publishes in %v, %d files waiting", noticed.Round(time.Millisecond), attempts, window.Round(time.Millisecond), retrying)

	free()
	freed := time.Now()
	var back time.Duration
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := statusWithin(cfg.StateDir, 2*time.Second)
		if err != nil {
			t.Fatalf("status did not answer after the disk was freed: %v", err)
		}
		if back == 0 && st.Store.State == embedded.StoreOK {
			back = time.Since(freed)
		}
		return st.Store.State == embedded.StoreOK, fmt.Sprintf("%+v", st.Store)
	})
	// Writers go on a little past the recovery, then stop.
	time.Sleep(time.Second) // more appends after the recovery, not synchronisation
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var lines int
	waitUntil(t, 60*time.Second, func() (bool, string) {
		ok, why, n := streamMatchesFiles(cfg.StateDir, w.files)
		lines = n
		return ok, why
	})
	caughtUp := time.Since(freed)
	st, err := statusWithin(cfg.StateDir, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Store.Recoveries != 1 || st.Store.WriteFailures != 1 || st.FilesRetrying != 0 {
		t.Errorf("status after recovery: store %+v, %d files retrying", st.Store, st.FilesRetrying)
	}
	if resp, err := getControlPath(cfg.StateDir, "/healthz"); err != nil || strings.TrimSpace(resp) != "ok" {
		t.Errorf("healthz after recovery: %q %v", resp, err)
	}
	if c := strings.Count(logs.String(), "the event store takes writes again"); c != 1 {
		t.Errorf("%d recoveries logged, want 1", c)
	}
	t.Logf("store writable %v after space was freed; all %d lines stored exactly once %v after", back.Round(time.Millisecond), lines, caughtUp.Round(time.Millisecond))

	// The projection catches up too: the catalog counts every entry.
	waitUntil(t, 60*time.Second, func() (bool, string) {
		cat, err := a.d.proj.Catalog(t.Context())
		if err != nil {
			return false, err.Error()
		}
		for _, path := range w.files {
			data, _ := os.ReadFile(path)
			want := splitLines(string(data))
			var hdr struct{ ID string }
			json.Unmarshal([]byte(want[0]), &hdr)
			found := false
			for _, c := range cat {
				if c.SessionID == hdr.ID {
					found = true
					if c.Entries != len(want)-1 {
						return false, fmt.Sprintf("catalog: session %s has %d entries, the file %d", hdr.ID, c.Entries, len(want)-1)
					}
				}
			}
			if !found {
				return false, "catalog lacks " + hdr.ID
			}
		}
		return true, ""
	})
	t.Logf("the projection holds every entry %v after space was freed", time.Since(freed).Round(time.Millisecond))

	// Every worker whose pause was logged says when it works again, so
	// that the outage in the log has an end.
	for _, what := range []string{"projection", "search indexing", "forwarding to the hub", "copying from the hub", "replication"} {
		if !strings.Contains(logs.String(), what+" paused; retrying") {
			continue
		}
		t.Logf("%s paused while the disk was full", what)
		waitUntil(t, 60*time.Second, func() (bool, string) {
			return strings.Contains(logs.String(), what+" works again"), what + " paused and never said it works again"
		})
	}

	// The forwarder and B catch up by themselves: B holds A's files.
	waitUntil(t, 60*time.Second, holdsCopies(b, w.files))
	t.Logf("B holds every line %v after space was freed on A", time.Since(freed).Round(time.Millisecond))
}

// TestCatchUpOnFullDisk: B comes back to a backlog on the hub with its
// state disk full. Its downloader stores the backlog as atomic batches,
// which a full disk fails as "incomplete" with every stream healthy: the
// failed writes make the store watch probe the disk, so B's status says
// the store cannot write, and once space is freed B holds every line.
func TestCatchUpOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	hub := startTestHub(t)
	a := newStation(t, "cfull-a", hub.url(), "")
	cfg := stationConfig(t, "cfull-b", hub.url())
	testenv.Tmpfs(t, cfg.StateDir, 16<<20)
	b := runStation(t, cfg)

	w := newSessionWriter(t, a.cfg.SessionsDir, 3, uint64(time.Now().UnixNano()))
	bHolds := holdsCopies(b, w.files)
	waitUntil(t, 30*time.Second, bHolds)

	b.stop()
	for range 300 {
		if err := w.step(); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		ok, why, _ := streamMatchesFiles(a.cfg.StateDir, w.files)
		return ok, why
	})
	free := testenv.Fill(t, cfg.StateDir)
	b.start()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := statusWithin(cfg.StateDir, 10*time.Second)
		if err != nil || st.Store == nil {
			return false, fmt.Sprint(err)
		}
		return st.Store.State == embedded.StoreFailing && strings.Contains(st.Store.Error, "no space left"), fmt.Sprintf("%+v", st.Store)
	})
	free()
	waitUntil(t, 60*time.Second, bHolds)
	st, err := statusWithin(cfg.StateDir, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Store.State != embedded.StoreOK || st.Store.Recoveries < 1 {
		t.Errorf("B's store after space was freed: %+v", st.Store)
	}
}

// TestSessionsDirDiskFull fills the real disk under B's sessions dir while A
// writes sessions that replicate to B, then frees it: B keeps answering
// status and reports the full disk, its replicator retries (quarantining
// nothing), and B's files catch up with A's by themselves.
func TestSessionsDirDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	hub := startTestHub(t)
	a := newStation(t, "sfull-a", hub.url(), "")
	cfg := stationConfig(t, "sfull-b", hub.url())
	cfg.LogLevel = "info" // the recovery is logged at info
	testenv.Tmpfs(t, cfg.SessionsDir, 8<<20)
	logs := &testenv.LogBuffer{}
	b := runStationLogs(t, cfg, logs)

	w := newSessionWriter(t, a.cfg.SessionsDir, 3, uint64(time.Now().UnixNano()))
	stop := writeLoop(w, 20*time.Millisecond)
	defer stop()
	bHolds := holdsCopies(b, w.files)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := statusWithin(cfg.StateDir, 2*time.Second)
		return err == nil && st.Replicator != nil && st.Replicator.LinesWritten > 50, fmt.Sprintf("%v", err)
	})

	free := testenv.Fill(t, cfg.SessionsDir)
	full := time.Now()
	var noticed time.Duration
	for noticed == 0 || time.Since(full) < 5*time.Second {
		st, err := statusWithin(cfg.StateDir, 10*time.Second)
		if err != nil {
			t.Fatalf("status did not answer while the sessions disk is full: %v", err)
		}
		if noticed == 0 && st.SessionsDirFreeBytes < 1<<20 {
			noticed = time.Since(full)
		}
		if noticed == 0 && time.Since(full) > 30*time.Second {
			t.Fatalf("status did not report the full sessions disk 30 s after it filled")
		}
		time.Sleep(100 * time.Millisecond) // a user's pace, not synchronisation
	}
	// One warning per failing stretch of a session, not one per retry: a
	// line small enough for the last free bytes can land between two
	// failures, and then the session recovers and may fail again, each
	// said once.
	warned, recovered := map[string]int{}, map[string]int{}
	for _, l := range strings.Split(logs.String(), "\n") {
		sess := ""
		if i := strings.Index(l, " session="); i >= 0 {
			sess, _, _ = strings.Cut(l[i+len(" session="):], " ")
		}
		switch {
		case strings.Contains(l, "cannot write a session from another machine; retrying"):
			warned[sess]++
		case strings.Contains(l, "writing a session from another machine works again"):
			recovered[sess]++
		}
	}
	if len(warned) == 0 {
		t.Error("no replicator retry warning while the sessions disk was full")
	}
	// Status says which writes fail, and why (it said "remote lines
	// waiting N" alone).
	if st, err := statusWithin(cfg.StateDir, 10*time.Second); err != nil || st.Replicator.Failing == 0 || !strings.Contains(st.Replicator.FailingError, "no space left on device") {
		t.Errorf("status while B's writes fail: %v %+v", err, st.Replicator)
	}
	for sess, w := range warned {
		if w > recovered[sess]+1 {
			t.Errorf("session %s: %d retry warnings for %d recoveries; want one per failing stretch", sess, w, recovered[sess])
		}
		// The disk stays full (filled to its last byte): a recovery is
		// not one. (A write cut short and taken back read as a pi's
		// write, put off, and that counted as success: "works again"
		// and a new warning about once a second, the pause never grown.)
		// Two are real at most: another session's write cut short and
		// taken back frees its bytes, and a smaller line then fits (a
		// run of the whole suite under load saw two, 2026-12-06).
		if recovered[sess] > 2 {
			t.Errorf("session %s: %d recoveries logged while the disk stayed full", sess, recovered[sess])
		}
	}

	free()
	freed := time.Now()
	time.Sleep(time.Second) // more appends after the space is back, not synchronisation
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, bHolds)
	caughtUp := time.Since(freed)
	st, err := statusWithin(cfg.StateDir, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Replicator.Quarantined) != 0 || st.Replicator.Rejected != 0 || st.Replicator.Failing != 0 || st.Replicator.FailingError != "" {
		t.Errorf("the full disk quarantined or rejected sessions, or writes still fail: %+v", st.Replicator)
	}
	// B published none of A's lines as its own.
	if st.Tailer.LinesPublished != 0 {
		t.Errorf("B published %d lines of replicated files", st.Tailer.LinesPublished)
	}
	if c := strings.Count(logs.String(), "writing a session from another machine works again"); c == 0 {
		t.Errorf("no recovery logged by the replicator")
	}
	t.Logf("full sessions disk reported after %v; B holds every line %v after space was freed", noticed.Round(time.Millisecond), caughtUp.Round(time.Millisecond))
}

// TestStartOnFullDisk: a daemon started (after kill -9) on a full state
// disk does not exit: it says why it waits, and goes on by itself once
// space is freed, publishing what was written meanwhile. It waits before
// it starts when its start must write (a stream to create or change), and
// starts and waits on the store otherwise (streams already in place are
// not written at start: eventlog.EnsureStream).
func TestStartOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	testenv.Tmpfs(t, state, 16<<20)
	env := []string{"PISYNC_SESSIONS_DIR=" + sessions, "PISYNC_STATE_DIR=" + state, "PISYNC_NODE_ID=fullstart",
		"PISYNC_RESCAN_INTERVAL=200ms", "PISYNC_LOG_LEVEL=info"}
	w := newSessionWriter(t, sessions, 2, uint64(time.Now().UnixNano()))
	p := startDaemonProc(t, env)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		ok, why, _ := streamMatchesFiles(state, w.files)
		return ok, why
	})
	p.kill(t, syscall.SIGKILL)

	free := testenv.Fill(t, state)
	p = startDaemonProc(t, env)
	defer func() {
		if p != nil {
			p.kill(t, syscall.SIGTERM)
		}
	}()
	for i := 0; i < 20; i++ {
		if err := w.step(); err != nil {
			t.Fatal(err)
		}
	}
	const (
		startWaits  = "disk is full; pisyncd starts once it takes writes again"
		startedOn   = "takes writes again; starting"
		storeWaits  = "the event store cannot write (disk full?)"
		storeWrites = "the event store takes writes again"
	)
	waitUntil(t, 10*time.Second, func() (bool, string) {
		text := stderrText(p)
		return strings.Contains(text, startWaits) || strings.Contains(text, storeWaits), text
	})
	select {
	case err := <-p.done:
		t.Fatalf("the daemon exited on a full disk: %v\n%s", err, stderrText(p))
	default:
	}
	free()
	freed := time.Now()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		ok, why, _ := streamMatchesFiles(state, w.files)
		return ok, why
	})
	t.Logf("started and caught up %v after space was freed", time.Since(freed).Round(time.Millisecond))
	if text := stderrText(p); strings.Contains(text, startWaits) && !strings.Contains(text, startedOn) ||
		strings.Contains(text, storeWaits) && !strings.Contains(text, storeWrites) {
		t.Errorf("the end of the wait is not logged:\n%s", text)
	}
	p.kill(t, syscall.SIGTERM)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	p = nil
}

// holdsCopies reports whether s holds a copy of each of files (another
// station's, found by name) with the same lines.
func holdsCopies(s *station, files []string) func() (bool, string) {
	return func() (bool, string) {
		held := s.sessionFiles()
		for _, path := range files {
			want, _ := os.ReadFile(path)
			var got []string
			for rel, l := range held {
				if filepath.Base(rel) == filepath.Base(path) {
					got = l
				}
			}
			if strings.Join(got, "\n") != strings.Join(splitLines(string(want)), "\n") {
				return false, fmt.Sprintf("%s's copy of %s: %d of %d lines", s.name, filepath.Base(path), len(got), len(splitLines(string(want))))
			}
		}
		return true, ""
	}
}

// stderrText reads a daemon process's stderr while it may be writing it.
func stderrText(p *daemonProc) string {
	lw, ok := p.cmd.Stderr.(*lockedWriter)
	if !ok {
		return ""
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.String()
}
