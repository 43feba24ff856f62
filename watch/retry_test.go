package watch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// storeGate plays the store's owner (embedded.StoreWatch) over a real
// server: it says whether the store takes writes, as eventlog.Writable.
type storeGate struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newStoreGate() *storeGate {
	g := &storeGate{}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	return g
}

func (g *storeGate) writable() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctx
}

func (g *storeGate) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cancel(err)
}

func (g *storeGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
}

func startGatedNode(t *testing.T, root string, logs *testenv.LogBuffer) (*node, *storeGate) {
	g := newStoreGate()
	return startNodeGatedBy(t, root, logs, g), g
}

// startNodeGatedBy starts a node whose store writes pass g, which a test
// may have closed before the node's first read.
func startNodeGatedBy(t *testing.T, root string, logs *testenv.LogBuffer, g *storeGate) *node {
	return startNodeWith(t, root, t.TempDir(), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}, func(tl *Tailer) {
		tl.log.(*eventlog.Local).SetWritable(g.writable)
	})
}

// TestPublishFailuresBackOff: while the store takes no writes, files that
// pi keeps appending to are tried at the pace of their back-off, not at
// every append; each is logged once when it starts failing and once when
// it is published again; afterwards every line is stored exactly once.
func TestPublishFailuresBackOff(t *testing.T) {
	root := t.TempDir()
	logs := &testenv.LogBuffer{}
	n, g := startGatedNode(t, root, logs)
	paths := []string{filepath.Join(root, "--p--", "a.jsonl"), filepath.Join(root, "--p--", "b.jsonl")}
	want := map[string][]string{}
	for i, p := range paths {
		sid := fmt.Sprintf("s%d", i)
		want[sid] = []string{header(sid)}
		writeFile(t, p, header(sid)+"\n")
		n.waitLines(sid, want[sid])
	}

	g.fail(errors.New("no space left on device (test)"))
	const window = 2 * time.Second
	start := time.Now()
	for k := 0; time.Since(start) < window; k++ {
		i := k % len(paths)
		sid := fmt.Sprintf("s%d", i)
		l := entry(fmt.Sprintf("e%d", k), "", "written while the store is full")
		appendFile(t, paths[i], l+"\n")
		want[sid] = append(want[sid], l)
		time.Sleep(5 * time.Millisecond) // pi's pace, not synchronisation
	}
	attempts := n.tailer.publishErrors.Load()
	appends := len(want["s0"]) + len(want["s1"]) - 2
	// 50 ms doubling: 50+100+200+400+800 ms fit in 2 s, so about six
	// attempts a file; one per append (hundreds) is the bug.
	if attempts > 2*8 {
		t.Errorf("%d failed publishes for %d appends in %v: the back-off does not hold", attempts, appends, window)
	}
	if attempts < 2 {
		t.Errorf("%d failed publishes: the files were not tried", attempts)
	}
	if r := n.tailer.Retrying(); r != 2 {
		t.Errorf("Retrying() = %d while both files fail, want 2", r)
	}
	if st := n.tailer.Stats(); !strings.Contains(st.LastError, "no space left") || !strings.Contains(st.LastError, "cannot take writes") {
		t.Errorf("lastError %q does not say the store cannot take writes", st.LastError)
	}
	t.Logf("%d appends in %v, %d failed publish attempts", appends, window, attempts)

	g.open()
	n.tailer.RetryNow()
	resumed := time.Now()
	for sid, w := range want {
		n.waitLines(sid, w)
	}
	t.Logf("all lines stored %v after the store took writes again", time.Since(resumed).Round(time.Millisecond))
	waitFor(t, 5*time.Second, func() (bool, string) {
		return n.tailer.Retrying() == 0, logs.String()
	})
	if st := n.tailer.Stats(); st.LastError != "" {
		t.Errorf("lastError %q once every file is published again, want none", st.LastError)
	}
	out := logs.String()
	if c := strings.Count(out, "session file not published; retrying"); c != 2 {
		t.Errorf("%d 'not published' lines for 2 failing files:\n%s", c, out)
	}
	if c := strings.Count(out, "session file published again"); c != 2 {
		t.Errorf("%d 'published again' lines for 2 recovered files:\n%s", c, out)
	}
}

// TestReloadChecksEveryLineAgain: a line the tailer believed stored while
// the store was failing (read from its memory, gone once it was restarted)
// is published after Reload, exactly once and in file order.
func TestReloadChecksEveryLineAgain(t *testing.T) {
	root := t.TempDir()
	n, g := startGatedNode(t, root, &testenv.LogBuffer{})
	path := filepath.Join(root, "--p--", "a.jsonl")
	want := []string{header("s1"), entry("e1", "", "stored")}
	writeFile(t, path, strings.Join(want, "\n")+"\n")
	n.waitLines("s1", want)
	n.tailer.mu.Lock()
	s := n.tailer.sessions["s1"].s
	n.tailer.mu.Unlock()
	s.mu.Lock()
	// The first read's hashes are dropped once it is done: load them
	// again, as the next publish would.
	if err := n.tailer.loadLocked(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	s.mu.Unlock()

	g.fail(errors.New("no space left on device (test)"))
	// What a read of the failing store may have shown: e2 as stored.
	e2 := entry("e2", "e1", "only in the failing store's memory")
	s.mu.Lock()
	s.known[sha256.Sum256([]byte(e2))] = struct{}{}
	s.mu.Unlock()
	appendFile(t, path, e2+"\n")
	n.handled(path) // e2 is passed over as known: the file's offset moves past it
	e3 := entry("e3", "e2", "written while the store is full")
	appendFile(t, path, e3+"\n")
	n.handled(path) // e3 fails: the store takes no writes
	if got := n.lines("s1"); len(got) != 2 {
		t.Fatalf("the store took lines while failing: %q", clip(got))
	}

	// The store's owner restarted it: reload, then let publishes through.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.tailer.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	g.open()
	n.tailer.RetryNow()
	n.waitLines("s1", append(want, e2, e3))
}

// handled submits path to its worker and waits until the worker has
// handled it (or held it back for its retry).
func (n *node) handled(path string) {
	n.t.Helper()
	n.tailer.submit(path)
	w := n.tailer.workers[maphash.String(n.tailer.seed, path)%uint64(len(n.tailer.workers))]
	ch := make(chan struct{})
	w.barrier(ch)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		n.t.Fatalf("%s not handled within 10s", path)
	}
}

// TestReloadKeepsADeletion: a session file deleted while its retry waited
// (the store failing) is still published as deleted after Reload.
func TestReloadKeepsADeletion(t *testing.T) {
	root := t.TempDir()
	n, g := startGatedNode(t, root, &testenv.LogBuffer{})
	path := filepath.Join(root, "--p--", "a.jsonl")
	want := []string{header("s1"), entry("e1", "", "stored")}
	writeFile(t, path, strings.Join(want, "\n")+"\n")
	n.waitLines("s1", want)

	g.fail(errors.New("no space left on device (test)"))
	appendFile(t, path, entry("e2", "e1", "not stored")+"\n")
	n.handled(path) // fails: the store takes no writes
	// Its next attempt is far off: the deletion below waits for it.
	w := n.tailer.workers[maphash.String(n.tailer.seed, path)%uint64(len(n.tailer.workers))]
	w.control(func(map[string]struct{}) {
		r := w.retry[path]
		r.at = time.Now().Add(time.Hour)
		w.retry[path] = r
	})
	n.handled(path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	n.handled(path) // held back: the deletion is not noticed yet

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.tailer.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	g.open()
	n.tailer.RetryNow()
	waitFor(t, 10*time.Second, func() (bool, string) {
		evs := n.events("s1")
		last := evs[len(evs)-1]
		return last.Op == eventlog.OpDelete, fmt.Sprintf("last event: %+v", last)
	})
	if got := n.lines("s1"); len(got) != 2 {
		t.Errorf("lines after the deletion: %q", clip(got))
	}
}

// TestPauseHoldsTheWorkers: while paused, no worker takes a step (not
// even a Reload's, which therefore cannot finish); after resume they go
// on, and what was appended meanwhile is published.
func TestPauseHoldsTheWorkers(t *testing.T) {
	root := t.TempDir()
	n, _ := startGatedNode(t, root, &testenv.LogBuffer{})
	path := filepath.Join(root, "--p--", "a.jsonl")
	want := []string{header("s1"), entry("e1", "", "before")}
	writeFile(t, path, strings.Join(want, "\n")+"\n")
	n.waitLines("s1", want)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resume, err := n.tailer.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e2 := entry("e2", "e1", "appended while paused")
	appendFile(t, path, e2+"\n")
	n.tailer.submit(path)
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if err := n.tailer.Reload(short); err == nil {
		t.Fatal("Reload finished while the workers were paused")
	}
	if got := n.lines("s1"); len(got) != 2 {
		t.Fatalf("lines published while paused: %q", clip(got))
	}
	resume()
	resume() // a second call is harmless
	if err := n.tailer.Reload(ctx); err != nil {
		t.Fatalf("Reload after resume: %v", err)
	}
	n.tailer.submit(path)
	n.waitLines("s1", append(want, e2))
}

// TestPauseTimesOut: a worker busy in a step makes Pause return an error
// when ctx ends; it pauses at its next step, until resume.
func TestPauseTimesOut(t *testing.T) {
	n, _ := startGatedNode(t, t.TempDir(), &testenv.LogBuffer{})
	hold := make(chan struct{})
	n.tailer.workers[0].control(func(map[string]struct{}) { <-hold })
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	resume, err := n.tailer.Pause(short)
	if err == nil {
		t.Fatal("Pause returned nil with a worker busy")
	}
	close(hold)
	resume()
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := n.tailer.Reload(ctx); err != nil {
		t.Fatalf("Reload after resume: %v", err)
	}
}

// TestPublishFailuresLogBounded: a store that takes no writes fails every
// file alike. The log names the first failLogMax failing files, then says
// once that more fail, and once that every file is published again (it
// had a warning and a recovery line for each: 3,000 sessions, 6,000 lines).
func TestPublishFailuresLogBounded(t *testing.T) {
	root := t.TempDir()
	logs := &testenv.LogBuffer{}
	const files = 12
	// The files are there before the node starts, so its first read meets
	// them all with the store full (files written after it began may be
	// found by the read or by the watcher, and only the read's summary is
	// under test here).
	for i := range files {
		sid := fmt.Sprintf("f%d", i)
		writeFile(t, filepath.Join(root, "--p--", sid+".jsonl"), header(sid)+"\n")
	}
	g := newStoreGate()
	g.fail(errors.New("no space left on device (test)"))
	n := startNodeGatedBy(t, root, logs, g)
	waitFor(t, 10*time.Second, func() (bool, string) {
		return n.tailer.Retrying() == files, fmt.Sprintf("retrying %d of %d", n.tailer.Retrying(), files)
	})
	<-n.tailer.Ready()
	// The first read's summary says the files wait, not that all is read.
	if out := logs.String(); !strings.Contains(out, `some are not published yet`) || !strings.Contains(out, "not_published=12") {
		t.Errorf("the first read's summary does not say files wait:\n%s", out)
	}
	g.open()
	n.tailer.RetryNow()
	for i := range files {
		sid := fmt.Sprintf("f%d", i)
		n.waitLines(sid, []string{header(sid)})
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "every session file is published again"), logs.String()
	})
	out := logs.String()
	for line, want := range map[string]int{
		"session file not published; retrying":  failLogMax,
		"more session files are not published":  1,
		"session file published again":          failLogMax,
		"every session file is published again": 1,
	} {
		if c := strings.Count(out, line); c != want {
			t.Errorf("%d lines %q, want %d:\n%s", c, line, want, out)
		}
	}
}
