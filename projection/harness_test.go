package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/session"
	"github.com/pisyncd/pisyncd/watch"
)

const testNode = "test-node"

// node is an embedded server with a tailer over a sessions dir and a
// projection worker, as the daemon runs them.
type node struct {
	t      testing.TB
	root   string
	srv    *embedded.Server
	nc     *nats.Conn
	log    *eventlog.Local
	cancel context.CancelFunc
	done   chan error
	worker *Worker
	wdone  chan error
	wstop  context.CancelFunc
	rules  session.RuleSet // the worker's Options.Rules (startWorker)
	// writeAfter is the worker's Options.WriteAfter (startWorker).
	writeAfter <-chan struct{}
	logger     *slog.Logger // the worker's Options.Logger (startWorker)
}

func startNode(t testing.TB, root, state string) *node {
	t.Helper()
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Config{StateDir: state, NodeID: testNode})
	if err != nil {
		t.Fatalf("embedded: %v", err)
	}
	nc, err := srv.Connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	lg, err := eventlog.OpenLocal(ctx, nc, testNode)
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	n := &node{t: t, root: root, srv: srv, nc: nc, log: lg, done: make(chan error, 1)}
	if root != "" {
		tl := watch.New(lg, watch.Options{Root: root, Workers: 4, RescanInterval: 200 * time.Millisecond, MaxLine: 16 << 20})
		rctx, cancel := context.WithCancel(ctx)
		n.cancel = cancel
		go func() { n.done <- tl.Run(rctx) }()
	}
	n.startWorker()
	t.Cleanup(n.stop)
	return n
}

func (n *node) startWorker() {
	n.t.Helper()
	w, err := New(n.nc, Options{Node: testNode, Rules: n.rules, SessionsDir: n.root, WriteAfter: n.writeAfter, Logger: n.logger})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.worker, n.wstop, n.wdone = w, cancel, make(chan error, 1)
	go func() { n.wdone <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case err := <-n.wdone:
		n.t.Fatalf("worker: %v", err)
	case <-time.After(20 * time.Second):
		n.t.Fatal("worker not ready")
	}
}

func (n *node) stopWorker() {
	if n.wstop == nil {
		return
	}
	n.wstop()
	if err := <-n.wdone; err != nil {
		n.t.Errorf("worker: %v", err)
	}
	n.wstop = nil
}

func (n *node) stop() {
	n.stopWorker()
	if n.cancel != nil {
		n.cancel()
		if err := <-n.done; err != nil {
			n.t.Errorf("tailer: %v", err)
		}
		n.cancel = nil
	}
	if n.srv != nil {
		n.nc.Close()
		n.srv.Close()
		n.srv = nil
	}
}

// waitFor waits for cond (testenv.WaitFor).
func waitFor(t testing.TB, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	testenv.WaitFor(t, d, cond)
}

// contextJSON is the projection's context of sid, or an error text.
func (n *node) contextJSON(sid string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := n.worker.Context(ctx, sid)
	if err != nil {
		return "error: " + err.Error()
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// writtenContext is the projection's context of sid as WriteContext
// streams it, or an error text.
func (n *node) writtenContext(sid string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b bytes.Buffer
	if err := n.worker.WriteContext(ctx, &b, sid, "", n.worker.Rules()); err != nil {
		return "error: " + err.Error()
	}
	// The rule set fields come first (session.ReportJSON; TestRulesViews checks
	// them); the rest is the corpus shape that contextJSON marshals.
	return rulesFields.ReplaceAllString(b.String(), "{")
}

var rulesFields = regexp.MustCompile(`^\{"rules":"[^"]*","rulesMode":"[^"]*",`)

// waitContext waits until the projection's context of sid is want, both
// built (Context) and streamed (WriteContext).
func (n *node) waitContext(sid, want string) {
	n.t.Helper()
	waitFor(n.t, 30*time.Second, func() (bool, string) {
		got := n.contextJSON(sid)
		if got != want {
			return false, fmt.Sprintf("session %s:\n got %.400s\nwant %.400s", sid, got, want)
		}
		written := n.writtenContext(sid)
		return written == want, fmt.Sprintf("session %s streamed:\n got %.400s\nwant %.400s", sid, written, want)
	})
}

// waitFileContext waits until the projection's context of sid is what
// the file at path holds now.
func (n *node) waitFileContext(sid, path string) {
	n.t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		n.t.Fatal(err)
	}
	n.waitContext(sid, fileContext(n.t, data))
}

// catalogEntry is sid's entry in the worker's catalog (what Catalog
// serves, first messages included).
func (n *node) catalogEntry(sid string) (CatalogEntry, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cat, err := n.worker.Catalog(ctx)
	if err != nil {
		return CatalogEntry{}, false
	}
	for _, c := range cat {
		if c.SessionID == sid {
			return c, true
		}
	}
	return CatalogEntry{}, false
}

func (n *node) kvGet(key string, v any) bool {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := n.worker.kv.Get(ctx, key)
	if err != nil {
		return false
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		n.t.Fatalf("%s: %v", key, err)
	}
	return true
}

func fileContext(t testing.TB, data []byte) string {
	t.Helper()
	f, err := session.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Context()
	if err != nil {
		return "error"
	}
	b, _ := json.Marshal(c)
	return string(b)
}

func assistant(id, parent string, tokens int) string {
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-11-29T23:09:17.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"provider":"anthropic","model":"claude","usage":{"totalTokens":%d,"cost":{"total":0.5}},"timestamp":2}}`, id, parent, tokens)
}

// linear is a session file of n entries on one branch.
func linear(sid string, n int, pad int) []byte {
	var b bytes.Buffer
	b.WriteString(header(sid) + "\n")
	parent := ""
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("e%07d", i)
		b.WriteString(entry(id, parent, fmt.Sprintf("message %d %s", i, bytes.Repeat([]byte("x"), pad))) + "\n")
		parent = id
	}
	return b.Bytes()
}

// Fixtures shared with the other packages' tests (testenv).
func writeFile(t testing.TB, path string, data []byte) { testenv.WriteFile(t, path, data) }

func appendFile(t testing.TB, path, data string) { testenv.AppendFile(t, path, data) }

func header(sid string) string { return testenv.Header(sid) }

func entry(id, parent, text string) string { return testenv.Entry(id, parent, text) }

// byHand is a worker stopped after it projected one linear session, whose
// apply path a test drives by hand, event by event.
type byHand struct {
	w   *Worker
	s   *sessionState
	f   *follower
	sid string
	seq uint64
}

// newByHand projects a linear session of n entries (ids e0000000 on, text
// padded with pad bytes), then stops the worker.
func newByHand(tb testing.TB, sid string, n, pad int) *byHand {
	tb.Helper()
	root := tb.TempDir()
	data := linear(sid, n, pad)
	writeFile(tb, filepath.Join(root, "--byhand--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl"), data)
	nd := startNode(tb, root, tb.TempDir())
	nd.waitContext(sid, fileContext(tb, data))
	nd.stopWorker()
	s := nd.worker.lookup(sid, false)
	return &byHand{w: nd.worker, s: s, sid: sid, seq: s.cat.Src.Get(eventlog.LocalStream),
		f: &follower{stream: eventlog.LocalStream, dirty: map[*sessionState]struct{}{}}}
}

// apply applies the next PI_LOCAL event of the session: line raw, entry id
// below parent.
func (h *byHand) apply(tb testing.TB, id, parent, raw string) {
	tb.Helper()
	h.seq++
	ev := &eventlog.Event{Stream: eventlog.LocalStream, Subject: eventlog.LocalSubject(testNode, h.sid), Seq: h.seq,
		Node: testNode, SID: h.sid, ID: id, ParentID: parent, Type: "message", Raw: []byte(raw)}
	if err := h.w.applyEvent(context.Background(), h.f, ev); err != nil {
		tb.Fatal(err)
	}
}
