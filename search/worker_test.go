package search

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

const testNode = "test-node"

// rig is an embedded server with PI_LOCAL and an index with its worker, as
// the daemon runs them.
type rig struct {
	t     *testing.T
	nc    *nats.Conn
	log   *eventlog.Local
	dir   string
	ix    *Index
	w     *Worker
	stop  context.CancelFunc
	done  chan error
	lasts map[string]uint64
	// fg is the worker's Options.Foreground (nil: none).
	fg interface {
		Wait(ctx context.Context, max time.Duration) error
	}
	logger *slog.Logger // the worker's Options.Logger (nil: none)
}

func newRig(t *testing.T) *rig {
	t.Helper()
	state := t.TempDir()
	srv, err := embedded.Start(context.Background(), embedded.Config{StateDir: state, NodeID: testNode})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	lg, err := eventlog.OpenLocal(context.Background(), nc, testNode)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, nc: nc, log: lg, dir: filepath.Join(state, "search"), lasts: map[string]uint64{}}
	t.Cleanup(func() {
		r.stopWorker()
		nc.Close()
		srv.Close()
	})
	r.startWorker()
	return r
}

func (r *rig) startWorker() {
	r.t.Helper()
	ix, err := Open(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	w, err := NewWorker(r.nc, ix, Options{Node: testNode, BatchBytes: 4096, Foreground: r.fg, Logger: r.logger})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.ix, r.w, r.stop, r.done = ix, w, cancel, make(chan error, 1)
	go func() { r.done <- w.Run(ctx) }()
}

func (r *rig) stopWorker() {
	if r.stop == nil {
		return
	}
	r.stop()
	if err := <-r.done; err != nil {
		r.t.Errorf("worker: %v", err)
	}
	if err := r.ix.Close(); err != nil {
		r.t.Error(err)
	}
	r.stop = nil
}

// publish appends lines to the session's subject as the tailer would.
func (r *rig) publish(sid string, lines ...string) uint64 {
	r.t.Helper()
	var ls []eventlog.Line
	for i, l := range lines {
		ls = append(ls, eventlog.NewLine([]byte(l), fmt.Sprint(i), "", "message", sid+".jsonl", int64(i+1)))
	}
	last, _, err := r.log.Publish(context.Background(), sid, r.lasts[sid], ls)
	if err != nil {
		r.t.Fatal(err)
	}
	r.lasts[sid] = last
	return last
}

func (r *rig) waitTotal(q string, want uint64) Result {
	r.t.Helper()
	pq, err := ParseQuery(q)
	if err != nil {
		r.t.Fatal(err)
	}
	var res Result
	testenv.WaitFor(r.t, 20*time.Second, func() (bool, string) {
		res, err = r.ix.Search(context.Background(), pq, 100, 0)
		return err == nil && res.Total == want, fmt.Sprintf("%q: %d hits (%v), want %d", q, res.Total, err, want)
	})
	return res
}

func (r *rig) waitPosition(seq uint64) {
	r.t.Helper()
	testenv.WaitFor(r.t, 20*time.Second, func() (bool, string) {
		pos, err := r.ix.Position(eventlog.LocalStream)
		return err == nil && pos >= seq, fmt.Sprintf("position %d (%v), want %d", pos, err, seq)
	})
}

func session(sid string, n int, word string) []string {
	lines := []string{testenv.Header(sid)}
	parent := ""
	for i := range n {
		id := fmt.Sprintf("%s-e%d", sid, i)
		lines = append(lines, testenv.Entry(id, parent, fmt.Sprintf("%s line %d of %s", word, i, sid)))
		parent = id
	}
	return lines
}

func TestWorkerIndexesResumesAndErases(t *testing.T) {
	r := newRig(t)
	r.publish("s1", session("s1", 50, "alpha")...)
	last := r.publish("s2", session("s2", 30, "beta")...)
	res := r.waitTotal("alpha", 50)
	h := res.Hits[0]
	if h.SessionID != "s1" || h.Node != testNode || h.Type != "message" || h.Role != "user" || h.Timestamp == "" {
		t.Errorf("hit %+v", h)
	}
	r.waitTotal("beta", 30)
	r.waitTotal("/home/u/p", 2) // the headers' cwd
	r.waitPosition(last)

	// A restart resumes after the saved position: nothing is indexed again.
	r.stopWorker()
	r.startWorker()
	if r.ix.Rebuilt {
		t.Fatal("the index was rebuilt on restart")
	}
	// What the index held is handled at once, not at the next line.
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := r.w.WaitHandled(wctx, eventlog.LocalStream, last); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	last = r.publish("s2", testenv.Entry("s2-late", "s2-e29", "gamma arrives after the restart"))
	r.waitTotal("gamma", 1)
	r.waitPosition(last)
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) { return r.w.Stats().Indexed >= 1, "the new line counted" })
	if st := r.w.Stats(); st.Indexed != 1 {
		t.Errorf("after the restart %d documents were indexed, want 1 (the new line)", st.Indexed)
	}
	r.waitTotal("beta", 30)

	// An erase event removes the session; the other stays.
	seq, err := r.log.PublishErase(context.Background(), "s1", eventlog.EraseLine("s1.jsonl", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.w.WaitHandled(ctx, eventlog.LocalStream, seq); err != nil {
		t.Fatal(err)
	}
	r.waitTotal("session:s1", 0)
	r.waitTotal("alpha", 0)
	r.waitTotal("beta", 30)
	if st := r.w.Stats(); st.Erased != 1 {
		t.Errorf("stats %+v", st)
	}
	// Lines of the session after the erase are a new session, indexed.
	r.lasts["s1"] = seq
	r.publish("s1", testenv.HeaderAt("s1", "/home/u/q", "2026-11-30T00:00:00.000Z"), testenv.Entry("n1", "", "delta reborn"))
	r.waitTotal("delta", 1)
}

// TestWorkerCoalescesLiveLines: live lines read within liveEvery of the
// last batch go into one batch, not a batch (a persisted segment) each,
// and while they wait Unindexed counts them; none is lost.
func TestWorkerCoalescesLiveLines(t *testing.T) {
	r := newRig(t)
	r.waitPosition(r.publish("s1", session("s1", 1, "alpha")...))
	before := r.w.Stats().Batches
	const n = 10
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	parent := "s1-e0"
	heldSeen := false
	for i := range n {
		id := fmt.Sprintf("live%d", i)
		seq := r.publish("s1", testenv.Entry(id, parent, "omega live line"))
		parent = id
		// Read before the next is published: without the coalescing,
		// each would be written alone, the follower having caught up.
		if err := r.w.WaitHandled(ctx, eventlog.LocalStream, seq); err != nil {
			t.Fatal(err)
		}
		if u, err := r.w.Unindexed(ctx); err == nil && u > 0 {
			heldSeen = true
		}
	}
	r.waitTotal("omega", n)
	// The batch counts once bleve is done with it, after its documents
	// can be found.
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
		return r.w.Stats().Batches > before, "the batch counted"
	})
	if got := r.w.Stats().Batches - before; got > n/2 {
		t.Errorf("%d live lines, each read before the next came, took %d batches: want them coalesced", n, got)
	}
	if !heldSeen {
		t.Error("Unindexed never counted the lines held for a batch")
	}
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
		u, err := r.w.Unindexed(ctx)
		return err == nil && u == 0, fmt.Sprintf("unindexed %d (%v) once written", u, err)
	})
}

// holdGate is foreground work under way until release is closed.
type holdGate struct {
	waits   atomic.Int32
	release chan struct{}
}

func (h *holdGate) Wait(ctx context.Context, _ time.Duration) error {
	h.waits.Add(1)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestWorkerWaitsForForeground: while a person waits on a query the
// worker writes no batch; it writes once the query is over.
func TestWorkerWaitsForForeground(t *testing.T) {
	r := newRig(t)
	r.stopWorker()
	h := &holdGate{release: make(chan struct{})}
	r.fg = h
	r.startWorker()
	last := r.publish("s1", session("s1", 3, "alpha")...)
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) { return h.waits.Load() >= 1, "the worker waits for the foreground" })
	if n, err := r.ix.DocCount(); err != nil || n != 0 || r.w.Stats().Batches != 0 {
		t.Fatalf("written while foreground work was under way: %d documents (%v)", n, err)
	}
	close(h.release)
	r.waitTotal("alpha", 3)
	r.waitPosition(last)
}

func TestWorkerRebuildsMissingIndex(t *testing.T) {
	r := newRig(t)
	last := r.publish("s1", session("s1", 20, "alpha")...)
	r.waitTotal("alpha", 20)
	r.waitPosition(last)
	r.stopWorker()
	if err := removeAll(r.dir); err != nil {
		t.Fatal(err)
	}
	r.startWorker()
	if !r.ix.Rebuilt {
		t.Fatal("not rebuilt")
	}
	r.waitTotal("alpha", 20)
}

func TestWorkerResetsIndexOfAnotherStore(t *testing.T) {
	r := newRig(t)
	last := r.publish("s1", session("s1", 5, "alpha")...)
	r.waitPosition(last)
	r.stopWorker()
	// The index says it read past the stream's end: a store made afresh.
	ix, err := Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Write([]Doc{{SessionID: "ghost", EntryID: "g", Type: "message", Text: "phantom"}}, eventlog.LocalStream, last+1000); err != nil {
		t.Fatal(err)
	}
	// The check at a start empties the index, and counts every line of
	// the stream as still to index (not the position's distance past it).
	w, err := NewWorker(r.nc, ix, Options{Node: testNode})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.checkStreams(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pos, _ := ix.Position(eventlog.LocalStream); pos != 0 || !ix.Rebuilt {
		t.Fatalf("after the check: position %d, rebuilt %v", pos, ix.Rebuilt)
	}
	if n := w.unwritten(); n != int64(last) {
		t.Fatalf("after the check: %d lines to index, want the stream's %d", n, last)
	}
	ix.Close()
	r.startWorker()
	r.waitTotal("phantom", 0)
	r.waitTotal("alpha", 5)
}

func removeAll(dir string) error { return os.RemoveAll(dir) }

// TestWorkerUnindexed: what the index has yet to read, before its
// followers start (the streams past the index's positions) and while they
// run (their consumers' pending).
func TestWorkerUnindexed(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.waitPosition(r.publish("s1", session("s1", 5, "alpha")...))
	unindexed := func(w *Worker, want int64) {
		t.Helper()
		testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
			n, err := w.Unindexed(ctx)
			return err == nil && n == want, fmt.Sprintf("unindexed %d (%v), want %d", n, err, want)
		})
	}
	unindexed(r.w, 0)
	r.stopWorker()
	r.publish("s1", testenv.Entry("late1", "s1-e4", "beta one"), testenv.Entry("late2", "late1", "beta two"))
	ix, err := Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(r.nc, ix, Options{Node: testNode})
	if err != nil {
		t.Fatal(err)
	}
	unindexed(w, 2) // not running: the stream past the index's position
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	r.startWorker()
	r.waitTotal("beta", 2)
	unindexed(r.w, 0)
}

// TestWorkerUnindexedFromItsStart: from the moment the worker runs, what
// the index has yet to add is never reported as nothing while the index's
// position is short of the stream's end. Before the followers set their
// counts from a first message, it was: a search in that moment said it
// had every line.
func TestWorkerUnindexedFromItsStart(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.stopWorker()
	last := r.publish("s1", session("s1", 2000, "gamma")...)
	r.startWorker()
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := r.w.Unindexed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The position only grows: read after the count, short of the end
		// means it was short when the count was taken.
		pos, err := r.ix.Position(eventlog.LocalStream)
		if err != nil {
			t.Fatal(err)
		}
		if pos >= last {
			return
		}
		if n == 0 {
			t.Fatalf("nothing unindexed reported with the index at %d of %d", pos, last)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the index at %d of %d after a minute", pos, last)
		}
	}
}
