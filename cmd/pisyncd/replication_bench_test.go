package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// Benchmarks of replication through a hub, in one process on loopback:
//
//	go test -run '^$' -bench BenchmarkReplication -benchtime 2000x ./cmd/pisyncd/    # latency
//	go test -run '^$' -bench BenchmarkCatchUp -benchtime 1x -timeout 30m ./cmd/pisyncd/
//
// PISYNC_BENCH_CATCHUP sets the catch-up backlog (default 100000 lines).
// docs/REPLICATION.md has the figures.

// benchNode is a hub or workstation for benchmarks (the cluster_test.go
// helpers take a *testing.T).
type benchNode struct {
	tb     testing.TB
	cfg    *config.Config
	d      *Daemon
	cancel context.CancelFunc
	done   chan error
}

func benchLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func benchHub(tb testing.TB) (*embedded.Server, string) {
	tb.Helper()
	addr := testenv.FreeAddr(tb)
	srv, err := StartHub(context.Background(), &config.Hub{
		Name: "hub-1", StateDir: tb.TempDir(), LeafListen: addr, Replicas: 1, MaxStore: 8 << 30, Open: true,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("hub: %v", err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv, "nats://" + addr
}

// benchStationWith is a workstation joined to the hub at hubURL, its
// configuration changed by edit (nil: none) before it starts.
func benchStationWith(tb testing.TB, name, hubURL string, edit func(*config.Config)) *benchNode {
	n := &benchNode{tb: tb, cfg: benchStationConfig(tb.TempDir(), name, hubURL)}
	if edit != nil {
		edit(n.cfg)
	}
	n.start()
	tb.Cleanup(n.stop)
	return n
}

// benchStationConfig is a benchmark workstation's configuration in home.
func benchStationConfig(home, name, hubURL string) *config.Config {
	return &config.Config{
		SessionsDir: filepath.Join(home, "sessions"), StateDir: filepath.Join(home, "state"), NodeID: name,
		LogLevel: "error", LogFormat: "text", HubURLs: []string{hubURL}, Delete: "trash",
		IdleAfter: 150 * time.Millisecond, RescanInterval: time.Second, MaxLine: 64 << 20,
		MaxStore: 8 << 30, MaxMemory: 256 << 20, Workers: 8, ShutdownTimeout: 30 * time.Second,
	}
}

func (n *benchNode) start() {
	n.tb.Helper()
	d, err := OpenDaemon(context.Background(), n.cfg, benchLogger())
	if err != nil {
		n.tb.Fatalf("%s: %v", n.cfg.NodeID, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.d, n.cancel, n.done = d, cancel, make(chan error, 1)
	go func() { n.done <- d.Run(ctx) }()
}

func (n *benchNode) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	if err := <-n.done; err != nil {
		n.tb.Errorf("%s: run: %v", n.cfg.NodeID, err)
	}
	if err := n.d.Close(); err != nil {
		n.tb.Errorf("%s: close: %v", n.cfg.NodeID, err)
	}
	n.cancel = nil
}

func benchWait(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// arrivals reports when each entry id first shows up: lines of a file
// (followed with fsnotify, polled as a fallback) or messages on a subject.
type arrivals struct {
	mu   sync.Mutex
	at   map[string]time.Time
	wake chan struct{}
}

func newArrivals() *arrivals {
	return &arrivals{at: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

func (a *arrivals) mark(id string, t time.Time) {
	a.mu.Lock()
	if _, ok := a.at[id]; !ok {
		a.at[id] = t
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *arrivals) get(id string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[id]
	return t, ok
}

// wait blocks until id arrived, or d passes.
func (a *arrivals) wait(id string, d time.Duration) (time.Time, bool) {
	deadline := time.After(d)
	for {
		if t, ok := a.get(id); ok {
			return t, true
		}
		select {
		case <-a.wake:
		case <-time.After(time.Millisecond):
		case <-deadline:
			return time.Time{}, false
		}
	}
}

var idPattern = regexp.MustCompile(`"id":"([^"]+)"`)

// followFile marks the ids of the lines appended to path until ctx ends.
func (a *arrivals) followFile(ctx context.Context, tb testing.TB, path string) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		tb.Fatal(err)
	}
	go func() {
		defer w.Close()
		var off int64
		var partial []byte
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Events:
			case <-w.Errors:
			case <-tick.C:
			}
			now := time.Now()
			f, err := os.Open(path)
			if err != nil {
				continue
			}
			f.Seek(off, io.SeekStart)
			b, _ := io.ReadAll(f)
			f.Close()
			off += int64(len(b))
			partial = append(partial, b...)
			for {
				i := strings.IndexByte(string(partial), '\n')
				if i < 0 {
					break
				}
				if m := idPattern.FindSubmatch(partial[:i]); m != nil {
					a.mark(string(m[1]), now)
				}
				partial = partial[i+1:]
			}
		}
	}()
}

// followSubject marks the Pi-Id of every message on subj.
func (a *arrivals) followSubject(tb testing.TB, nc *nats.Conn, subj string) {
	sub, err := nc.Subscribe(subj, func(m *nats.Msg) { a.mark(m.Header.Get(eventlog.HdrID), time.Now()) })
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sub.Unsubscribe() })
}

// rawPublisher publishes a payload like a session line to a file stream of
// its own on srv (the same server settings as PI_LOCAL: sync always), one
// synchronous publish at a time: the baseline of the latency benchmarks.
type rawPublisher struct {
	tb      testing.TB
	nc      *nats.Conn
	js      jetstream.JetStream
	payload []byte
}

func newRawPublisher(tb testing.TB, srv *embedded.Server, payload []byte) *rawPublisher {
	nc, err := srv.Connect()
	if err != nil {
		tb.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_BASELINE", Subjects: []string{"bench.baseline"}, Storage: jetstream.FileStorage}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		js.DeleteStream(context.Background(), "BENCH_BASELINE")
		nc.Close()
	})
	return &rawPublisher{tb: tb, nc: nc, js: js, payload: payload}
}

// once is the time of one publish until its ack.
func (r *rawPublisher) once() time.Duration {
	t0 := time.Now()
	if _, err := r.js.Publish(context.Background(), "bench.baseline", r.payload); err != nil {
		r.tb.Fatal(err)
	}
	return time.Since(t0)
}

// stageTimes are the times since the append of the lines that reached a
// stage.
type stageTimes struct {
	names []string
	times map[string][]time.Duration
}

func (s *stageTimes) add(name string, d time.Duration) {
	if s.times == nil {
		s.times = map[string][]time.Duration{}
	}
	if _, ok := s.times[name]; !ok {
		s.names = append(s.names, name)
	}
	s.times[name] = append(s.times[name], d)
}

// report sorts each stage's times and reports its p50 and p99, in ms and
// as a multiple of the baseline's.
func (s *stageTimes) report(b *testing.B, base []time.Duration) {
	sort.Slice(base, func(i, j int) bool { return base[i] < base[j] })
	b50, b99 := percentile(base, .5), percentile(base, .99)
	b.ReportMetric(ms(b50), "baseline-p50-ms")
	b.ReportMetric(ms(b99), "baseline-p99-ms")
	for _, name := range s.names {
		t := s.times[name]
		sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
		b.ReportMetric(ms(percentile(t, .5)), name+"-p50-ms")
		b.ReportMetric(ms(percentile(t, .99)), name+"-p99-ms")
		if b50 > 0 && b99 > 0 {
			b.ReportMetric(float64(percentile(t, .5))/float64(b50), name+"-p50-x-baseline")
			b.ReportMetric(float64(percentile(t, .99))/float64(b99), name+"-p99-x-baseline")
		}
	}
}

// BenchmarkReplicationLatency: one entry appended to a session file on A,
// one at a time; the time until the line is in B's copy (p50, p99), with
// the stages on the way (A's PI_LOCAL, the hub's PI_HUB as the message
// reaches each, B's PI_ALL once stored, each as time since the append),
// against a baseline of one synchronous JetStream publish on A's embedded
// server, interleaved: before each line, one baseline publish, so both
// see the same load (the machine is shared).
func BenchmarkReplicationLatency(b *testing.B) {
	withSearchOffAndOn(b, replicationLatency)
}

// withSearchOffAndOn runs bench as two sub-benchmarks: search=off, the
// path alone, and search=on, as a workstation is configured by default
// (PISYNC_SEARCH=auto), its index following both streams and writing to
// the same disk.
func withSearchOffAndOn(b *testing.B, bench func(*testing.B, func(*config.Config))) {
	for _, search := range []string{"off", "on"} {
		b.Run("search="+search, func(b *testing.B) {
			bench(b, func(c *config.Config) { c.Search = search })
		})
	}
}

func replicationLatency(b *testing.B, edit func(*config.Config)) {
	hub, hubURL := benchHub(b)
	na := benchStationWith(b, "ws-a", hubURL, edit)
	nb := benchStationWith(b, "ws-b", hubURL, edit)

	sid := "0199bebe-0000-7000-8000-000000000001"
	rel := sessionRel("/work/bench", sid)
	aPath := filepath.Join(na.cfg.SessionsDir, rel)
	bPath := filepath.Join(nb.cfg.SessionsDir, rel)
	if err := writeLines(aPath, []string{hdrLine(sid, "/work/bench"), msgLine("root", "", "start")}); err != nil {
		b.Fatal(err)
	}
	benchWait(b, 60*time.Second, "B's copy", func() bool {
		raw, _ := os.ReadFile(bPath)
		return len(splitLines(string(raw))) == 2
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inB, inLocal, inHub := newArrivals(), newArrivals(), newArrivals()
	inB.followFile(ctx, b, bPath)
	ncA, err := na.d.srv.Connect()
	if err != nil {
		b.Fatal(err)
	}
	defer ncA.Close()
	inLocal.followSubject(b, ncA, "pi.evt.ws-a.>")
	ncH, err := hub.Connect()
	if err != nil {
		b.Fatal(err)
	}
	defer ncH.Close()
	inHub.followSubject(b, ncH, "pi.up.ws-a.>")
	ncA.Flush()
	ncH.Flush()
	// PI_ALL on B: what the downloader stores is published by no one, so
	// follow the stream with a consumer.
	inAll := newArrivals()
	allCons, err := nb.d.log.JetStream().OrderedConsumer(ctx, eventlog.AllStream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := allCons.Consume(func(m jetstream.Msg) { inAll.mark(m.Headers().Get(eventlog.HdrID), time.Now()) })
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()

	text := strings.Repeat("a typical prompt of a few hundred bytes ", 8)
	raw := newRawPublisher(b, na.d.srv, []byte(msgLine("base", "root", text)))

	var st stageTimes
	var base []time.Duration
	parent := "root"
	send := func(i int) (time.Time, string) {
		id := fmt.Sprintf("lat%07d", i)
		t0 := time.Now()
		if err := writeLines(aPath, []string{msgLine(id, parent, text)}); err != nil {
			b.Fatal(err)
		}
		parent = id
		return t0, id
	}
	for i := 0; i < 20; i++ { // warm up
		raw.once()
		_, id := send(-i - 1)
		if _, ok := inB.wait(id, 30*time.Second); !ok {
			b.Fatalf("warm-up entry %s never reached B", id)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base = append(base, raw.once())
		t0, id := send(i)
		atB, ok := inB.wait(id, 30*time.Second)
		if !ok {
			b.Fatalf("entry %s never reached B", id)
		}
		for _, s := range []struct {
			name string
			a    *arrivals
		}{{"pi_local", inLocal}, {"pi_hub", inHub}, {"pi_all", inAll}} {
			if t, ok := s.a.get(id); ok {
				st.add(s.name, t.Sub(t0))
			}
		}
		st.add("file", atB.Sub(t0))
	}
	b.StopTimer()
	st.report(b, base)
	// The headline figures under their former names.
	t := st.times["file"]
	b.ReportMetric(ms(percentile(t, .5)), "p50-ms")
	b.ReportMetric(ms(percentile(t, .99)), "p99-ms")
	b.ReportMetric(float64(percentile(t, .5))/float64(percentile(base, .5)), "p50-x-baseline")
	b.ReportMetric(float64(percentile(t, .99))/float64(percentile(base, .99)), "p99-x-baseline")
}

// BenchmarkCatchUp: B is stopped; A writes N lines across 10 sessions that B
// already holds; once the hub has them all, B restarts. Reported: the rate
// at which B's files fill (lines/s, from B's start until its files hold
// every line), the rate of its PI_ALL alone, A's rate from its files to the
// hub, and as the baseline the rate of raw atomic batches (of
// eventlog.MaxBatch lines like the backlog's) into one stream on B's
// server, measured just before and just after B's catch-up in the same run
// (their mean), so that both see the same load; and a second baseline, the
// same raw batches made of the message PI_ALL stored for the last line
// (its Pi-* headers too), right after. Both with the search index off and
// on (a workstation's default, PISYNC_SEARCH=auto).
func BenchmarkCatchUp(b *testing.B) {
	withSearchOffAndOn(b, catchUp)
}

func catchUp(b *testing.B, edit func(*config.Config)) {
	n := testenv.EnvInt(b, "PISYNC_BENCH_CATCHUP", 100000, 1000, math.MaxInt)
	const sessions = 10
	for iter := 0; iter < b.N; iter++ {
		b.StopTimer()
		hub, hubURL := benchHub(b)
		na := benchStationWith(b, "ws-a", hubURL, edit)
		nb := benchStationWith(b, "ws-b", hubURL, edit)
		aPaths, bPaths := catchUpSessions(b, na, nb, sessions)
		payload := []byte(msgLine("s0l0000000", "root", backlogText))
		waitSettled(b, nb)
		before := rawBatchRate(b, nb.d.srv, payload, nil, n)
		nb.stop()
		t0 := time.Now()
		per := n / sessions
		writeBacklog(b, aPaths, per)
		total := uint64(sessions*2 + per*sessions)
		ncH, err := hub.Connect()
		if err != nil {
			b.Fatal(err)
		}
		jsH, _ := jetstream.New(ncH)
		benchWait(b, 30*time.Minute, "the hub holds A's lines", func() bool { return streamCount(jsH, eventlog.HubStream) == total })
		aRate := float64(n) / time.Since(t0).Seconds()
		ncH.Close()
		// A's search index writes its batches once its lines are on the
		// hub (they give way to the forwarder's backlog); on a machine of
		// its own that work would not share B's cores.
		benchWait(b, 30*time.Minute, "A's search index holds its lines", func() bool { return indexedAll(na) })

		var want []int64
		for _, p := range aPaths {
			st, err := os.Stat(p)
			if err != nil {
				b.Fatal(err)
			}
			want = append(want, st.Size())
		}
		// A's forwarding left its garbage in the heap B shares here:
		// given back now, as A's own process would, B's start does not
		// pay for it (a second and more of scavenging, 300,000 lines).
		waitSettled(b, na)
		debug.FreeOSMemory()
		stopProfile := testenv.CPUProfile(b, "PISYNC_BENCH_CPUPROFILE")
		b.StartTimer()
		t1 := time.Now()
		nb.start()
		jsB := nb.d.log.JetStream()
		var first, stored time.Duration
		held := uint64(2 * sessions) // what B copied before it stopped
		benchWait(b, 30*time.Minute, "B's files hold every line", func() bool {
			if stored == 0 {
				switch c := streamCount(jsB, eventlog.AllStream); {
				case c == total:
					stored = time.Since(t1)
				case first == 0 && c > held:
					first = time.Since(t1)
				}
			}
			for i, p := range bPaths {
				if st, err := os.Stat(p); err != nil || st.Size() < want[i] {
					return false
				}
			}
			return true
		})
		filed := time.Since(t1)
		b.StopTimer()
		stopProfile()
		if stored == 0 {
			stored = filed
		}
		for i := range aPaths {
			if err := sameFile(aPaths[i], bPaths[i]); err != nil {
				b.Fatal(err)
			}
		}
		waitSettled(b, nb)
		after := rawBatchRate(b, nb.d.srv, payload, nil, n)
		// The same, with the message PI_ALL stores for a line: its
		// payload and its Pi-* headers (about as many bytes again).
		last, err := nb.d.all.Stream().GetMsg(context.Background(), total)
		if err != nil {
			b.Fatal(err)
		}
		asStored := rawBatchRate(b, nb.d.srv, last.Data, last.Header, n)
		base := (before + after) / 2
		rate := float64(n) / filed.Seconds()
		b.ReportMetric(before, "baseline-before-batch-lines/s")
		b.ReportMetric(after, "baseline-after-batch-lines/s")
		b.ReportMetric(rate/base, "x-baseline")
		b.ReportMetric(asStored, "baseline-pi_all-msg-lines/s")
		b.ReportMetric(rate/asStored, "x-baseline-pi_all-msg")
		b.ReportMetric(rate, "lines/s")
		b.ReportMetric(float64(n)/stored.Seconds(), "pi_all-lines/s")
		// From B's start to its first copied line: the start-up (the
		// leaf connection, the hub consumer), not the copying.
		b.ReportMetric(ms(first), "first-copy-ms")
		b.ReportMetric(aRate, "a-to-hub-lines/s")
		b.ReportMetric(float64(n), "lines")
		nb.stop()
		na.stop()
	}
}

// indexedAll reports whether n's search index (if on) has written every
// message its streams hold.
func indexedAll(n *benchNode) bool {
	if n.d.searchW == nil {
		return true
	}
	left, err := n.d.searchW.Unindexed(context.Background())
	return err == nil && left == 0
}

// waitSettled waits until n's daemon gave its start's memory back. A
// start does it twice, the second time about 12 s after the first; with
// several daemons and the hub in one process, that collection and scavenge
// of the whole heap landed in another daemon's measured work (0.7-1 s of
// CPU in a profile of B's catch-up), or in a baseline, as it never does on
// machines of their own.
func waitSettled(b *testing.B, n *benchNode) {
	b.Helper()
	select {
	case <-n.d.settled:
	case <-time.After(time.Minute):
		b.Fatalf("%s did not give its start's memory back within a minute", n.cfg.NodeID)
	}
}

// streamCount is the number of messages in a stream, 0 when unknown.
func streamCount(js jetstream.JetStream, name string) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// rawBatchRate is the rate (messages/s) of n messages of payload (with the
// headers hdr, but for its Nats-* ones; nil: none) stored as atomic batches
// of eventlog.MaxBatch, one after the other, into a new file stream on srv:
// the most one stream takes from one writer.
func rawBatchRate(tb testing.TB, srv *embedded.Server, payload []byte, hdr nats.Header, n int) float64 {
	tb.Helper()
	nc, err := srv.Connect()
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const name = "BENCH_BATCH"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{"bench.batch"}, Storage: jetstream.FileStorage, AllowAtomicPublish: true,
	}); err != nil {
		tb.Fatal(err)
	}
	defer js.DeleteStream(context.Background(), name)
	t0 := time.Now()
	for done := 0; done < n; {
		k := min(eventlog.MaxBatch, n-done)
		id := nuid.Next()
		var resp *nats.Msg
		for i := 1; i <= k; i++ {
			m := nats.NewMsg("bench.batch")
			m.Data = payload
			for k, v := range hdr {
				if !strings.HasPrefix(k, "Nats-") {
					m.Header[k] = v
				}
			}
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
			if i < k {
				if err := nc.PublishMsg(m); err != nil {
					tb.Fatal(err)
				}
				continue
			}
			m.Header.Set("Nats-Batch-Commit", "1")
			if resp, err = nc.RequestMsgWithContext(ctx, m); err != nil {
				tb.Fatal(err)
			}
		}
		var ack struct {
			Count int                 `json:"count"`
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &ack); err != nil || ack.Error != nil || ack.Count != k {
			tb.Fatalf("raw batch: %s (%v)", resp.Data, err)
		}
		done += k
	}
	return float64(n) / time.Since(t0).Seconds()
}

// sameFile checks that two session files hold the same lines (no mapping:
// byte-equal, since A is the only writer).
func sameFile(a, b string) error {
	fa, err := os.Open(a)
	if err != nil {
		return err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return err
	}
	defer fb.Close()
	sa, sb := bufio.NewScanner(fa), bufio.NewScanner(fb)
	sa.Buffer(nil, 1<<20)
	sb.Buffer(nil, 1<<20)
	for i := 1; ; i++ {
		oa, ob := sa.Scan(), sb.Scan()
		if !oa && !ob {
			return nil
		}
		if oa != ob || sa.Text() != sb.Text() {
			return fmt.Errorf("%s and %s differ at line %d", a, b, i)
		}
	}
}

// catchUpSessions starts sessions sessions on A and waits until B holds a
// copy of each: the start of a catch-up benchmark. It returns the files on
// A and on B.
func catchUpSessions(b *testing.B, na, nb *benchNode, sessions int) (aPaths, bPaths []string) {
	for s := 0; s < sessions; s++ {
		sid := fmt.Sprintf("0199cafe-0000-7000-8000-%012d", s)
		rel := sessionRel(fmt.Sprintf("/work/p%d", s), sid)
		aPaths = append(aPaths, filepath.Join(na.cfg.SessionsDir, rel))
		bPaths = append(bPaths, filepath.Join(nb.cfg.SessionsDir, rel))
		if err := writeLines(aPaths[s], []string{hdrLine(sid, fmt.Sprintf("/work/p%d", s)), msgLine("root", "", "start")}); err != nil {
			b.Fatal(err)
		}
	}
	benchWait(b, 60*time.Second, "B's copies", func() bool {
		for _, p := range bPaths {
			if st, err := os.Stat(p); err != nil || st.Size() == 0 {
				return false
			}
		}
		return true
	})
	return aPaths, bPaths
}

// backlogText is the text of each backlog line.
var backlogText = strings.Repeat("backlog line text ", 12)

// writeBacklog appends per linear entries to each file, a thousand lines
// per write.
func writeBacklog(b *testing.B, paths []string, per int) {
	for s, p := range paths {
		batch := make([]string, 0, 1000)
		parent := "root"
		for i := 0; i < per; i++ {
			id := fmt.Sprintf("s%dl%07d", s, i)
			batch = append(batch, msgLine(id, parent, backlogText))
			parent = id
			if len(batch) == cap(batch) || i == per-1 {
				if err := writeLines(p, batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
}
