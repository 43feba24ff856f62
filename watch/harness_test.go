package watch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// node is one tailer over a real embedded server, as the daemon runs it.
type node struct {
	t      testing.TB
	root   string
	state  string
	srv    *embedded.Server
	log    *eventlog.Local
	tailer *Tailer
	cancel context.CancelFunc
	done   chan error
}

func startNode(t testing.TB, root, state string) *node {
	t.Helper()
	return startNodeRescan(t, root, state, 200*time.Millisecond)
}

// startNodeRescan starts a node whose periodic walk runs every rescan: a
// long one leaves only the first walk and fsnotify to find changes.
func startNodeRescan(t testing.TB, root, state string, rescan time.Duration) *node {
	t.Helper()
	return startNodeWith(t, root, state, Options{RescanInterval: rescan}, nil)
}

// startNodeWith starts a node with o (Root filled in; Workers 4 and
// MaxLine 16 MiB unless set) and lets adjust change the tailer before it
// runs.
func startNodeWith(t testing.TB, root, state string, o Options, adjust func(*Tailer)) *node {
	t.Helper()
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Config{StateDir: state, NodeID: "test-node", StoreCipher: benchCipher})
	if err != nil {
		t.Fatalf("embedded: %v", err)
	}
	nc, err := srv.Connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	lg, err := eventlog.OpenLocal(ctx, nc, "test-node")
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	n := &node{t: t, root: root, state: state, srv: srv, log: lg, done: make(chan error, 1)}
	o.Root = root
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.MaxLine == 0 {
		o.MaxLine = 16 << 20
	}
	n.tailer = New(lg, o)
	if adjust != nil {
		adjust(n.tailer)
	}
	rctx, cancel := context.WithCancel(ctx)
	n.cancel = cancel
	go func() { n.done <- n.tailer.Run(rctx) }()
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	if err := <-n.done; err != nil {
		n.t.Errorf("tailer: %v", err)
	}
	n.cancel = nil
	n.srv.Close()
}

// lines returns the session's stored lines in stream order (control
// events such as tombstones left out).
func (n *node) lines(sid string) []string {
	n.t.Helper()
	var out []string
	for _, ev := range n.events(sid) {
		if ev.Op == "" {
			out = append(out, string(ev.Raw))
		}
	}
	return out
}

// events returns every stored event of the session.
func (n *node) events(sid string) []*eventlog.Event {
	n.t.Helper()
	var out []*eventlog.Event
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := n.log.Scan(ctx, sid, 0, true, func(ev *eventlog.Event) error {
		out = append(out, ev)
		return nil
	})
	if err != nil {
		n.t.Fatalf("scan %s: %v", sid, err)
	}
	return out
}

// waitLines waits until the session holds exactly want, in order.
func (n *node) waitLines(sid string, want []string) {
	n.t.Helper()
	waitFor(n.t, 30*time.Second, func() (bool, string) {
		got := n.lines(sid)
		if equalStrings(got, want) {
			return true, ""
		}
		return false, fmt.Sprintf("session %s holds %d lines, want %d\n got: %q\nwant: %q", sid, len(got), len(want), clip(got), clip(want))
	})
}

func clip(s []string) []string {
	out := make([]string, len(s))
	for i, l := range s {
		if len(l) > 80 {
			l = l[:80] + fmt.Sprintf("...(%d bytes)", len(l))
		}
		out[i] = l
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// waitFor waits for cond (testenv.WaitFor).
func waitFor(t testing.TB, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	testenv.WaitFor(t, d, cond)
}

// Fixtures shared with the other packages' tests (testenv).
func writeFile(t testing.TB, path, data string) { testenv.WriteFile(t, path, []byte(data)) }

func appendFile(t testing.TB, path, data string) { testenv.AppendFile(t, path, data) }

func header(sid string) string { return testenv.Header(sid) }

func entry(id, parent, text string) string { return testenv.Entry(id, parent, text) }

// newTestLogger logs text at debug level into w.
func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
