package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestStoreWatchRecoversByRestart fills the real (tmpfs) disk under the
// store: the watch must report the write error at once, keep reporting it
// while the disk is full, and once space is freed restart the embedded
// server, so that the same connection, reconnected to the new server,
// publishes again, the stream holds everything acknowledged before,
// during and after, and the JetStream API answers each request once.
func TestStoreWatchRecoversByRestart(t *testing.T) {
	disk := t.TempDir()
	testenv.Tmpfs(t, disk, 8<<20)
	s := startServer(t, testConfig(t, filepath.Join(disk, "state")))
	var recovered, resumed atomic.Int64
	w, stop := runWatch(t, s, StoreWatchOptions{
		Logger:    testConfig(t, disk).Logger,
		Recovered: func(context.Context) error { recovered.Add(1); return nil },
		Resumed:   func() { resumed.Add(1) },
	})
	defer stop()

	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	st := createStream(t, js, "S")
	first := s.NATS()
	payload := []byte(strings.Repeat("x", 2000))
	// publish stores one message under the watch, as eventlog's publisher
	// does: it gives up when the store is reported unwritable.
	publish := func(i int) error {
		wctx := w.Writable()
		if wctx.Err() != nil {
			return context.Cause(wctx)
		}
		pctx, cancel := context.WithTimeout(wctx, 10*time.Second)
		defer cancel()
		_, err := js.Publish(pctx, fmt.Sprintf("S.%d", i), payload)
		if err != nil && wctx.Err() != nil {
			return context.Cause(wctx)
		}
		return err
	}
	acked := 0
	for ; acked < 10; acked++ {
		if err := publish(acked); err != nil {
			t.Fatal(err)
		}
	}

	free := testenv.Fill(t, disk)
	start := time.Now()
	var failErr error
	for i := 0; ; i++ {
		failErr = publish(1000 + i)
		if failErr != nil {
			break
		}
		acked++ // the store's page had room for this one
		if i > 1000 {
			t.Fatal("publishes keep succeeding on a full disk")
		}
	}
	noticed := time.Since(start)
	if !strings.Contains(failErr.Error(), "no space left") {
		t.Errorf("publish error %q does not name the full disk", failErr)
	}
	if noticed > 2*time.Second {
		t.Errorf("the failed publish returned after %v; want within 2s", noticed)
	}
	stats := w.Stats()
	if stats.State != StoreFailing || !strings.Contains(stats.Error, "no space left") || stats.WriteFailures != 1 {
		t.Errorf("stats while full: %+v", stats)
	}
	// While the disk stays full the store stays down, the watch does not
	// flap, and publishes fail at once.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		t0 := time.Now()
		if err := publish(2000); err == nil {
			t.Fatal("a publish succeeded while the disk is full")
		}
		if d := time.Since(t0); d > 50*time.Millisecond {
			t.Fatalf("a publish on a known-broken store took %v", d)
		}
		time.Sleep(100 * time.Millisecond) // pacing of the probe loop, not synchronisation
	}
	if n := w.Stats().WriteFailures; n != 1 || recovered.Load() != 0 {
		t.Errorf("while full: %d failures, %d recoveries", n, recovered.Load())
	}

	free()
	freed := time.Now()
	testenv.WaitFor(t, 15*time.Second, func() (bool, string) {
		return w.Writable().Err() == nil, fmt.Sprintf("%+v", w.Stats())
	})
	t.Logf("write error noticed in %v; writable again %v after space was freed", noticed, time.Since(freed).Round(time.Millisecond))
	for i := 0; i < 5; i++ {
		if err := publish(3000 + i); err != nil {
			t.Fatalf("publish after recovery: %v", err)
		}
		acked++
	}
	info, err := st.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(acked) {
		t.Errorf("stream holds %d messages, %d were acknowledged", info.State.Msgs, acked)
	}
	stats = w.Stats()
	if stats.State != StoreOK || stats.Recoveries != 1 || stats.WriteFailures != 1 || recovered.Load() != 1 || resumed.Load() != 1 || stats.LastOutageSeconds <= 0 {
		t.Errorf("stats after recovery: %+v (hooks %d %d)", stats, recovered.Load(), resumed.Load())
	}
	if !s.NATS().JetStreamEnabled() || s.Err() != nil {
		t.Errorf("server after recovery: JetStream %v, err %v", s.NATS().JetStreamEnabled(), s.Err())
	}
	if s.NATS() == first || first.Running() {
		t.Errorf("the server was not replaced: same %v, old one running %v", s.NATS() == first, first.Running())
	}
	if n := nc.Stats().Reconnects; n != 1 {
		t.Errorf("the client reconnected %d times, want once", n)
	}
	apiAnsweredOnce(t, s, nc)
}

// TestStoreWatchJetStreamOff: the server turns JetStream off by itself on
// some write errors; the watch turns it on again.
func TestStoreWatchJetStreamOff(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	first := s.NATS()
	// The Pause hook brackets the restart: paused on the old server,
	// resumed on the new one.
	var pausedOn, resumedOn atomic.Pointer[server.Server]
	w, stop := runWatch(t, s, StoreWatchOptions{
		Interval: 20 * time.Millisecond,
		Pause: func(context.Context) func() {
			pausedOn.Store(s.NATS())
			return func() { resumedOn.Store(s.NATS()) }
		},
	})
	defer stop()
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	createStream(t, js, "S")
	if err := s.NATS().ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, func() (bool, string) {
		st := w.Stats()
		return st.Recoveries == 1 && w.Writable().Err() == nil, fmt.Sprintf("%+v", st)
	})
	if _, err := js.Publish(testCtx(t), "S.1", []byte("x")); err != nil {
		t.Fatalf("publish after JetStream was turned on again: %v", err)
	}
	if pausedOn.Load() != first || resumedOn.Load() != s.NATS() || s.NATS() == first {
		t.Errorf("paused on the first server %v, resumed on the new one %v, replaced %v",
			pausedOn.Load() == first, resumedOn.Load() == s.NATS(), s.NATS() != first)
	}
	apiAnsweredOnce(t, s, nc)
}

// apiAnsweredOnce checks that the server has one JetStream API
// subscription and handles and answers each API request once. Restarting
// JetStream alone (nats-server 2.15's ShutdownJetStream, then
// EnableJetStream) left the old subscription behind, and every request
// was handled twice (the second answer is dropped on the way back, but
// the account's API count shows it).
func apiAnsweredOnce(t *testing.T, s *Server, nc *nats.Conn) {
	t.Helper()
	ns := s.NATS()
	sz, err := ns.Subsz(&server.SubszOptions{Subscriptions: true, Account: ns.SystemAccount().Name, Test: "$JS.API.INFO"})
	if err != nil {
		t.Fatal(err)
	}
	api := 0
	for _, d := range sz.Subs {
		if d.Subject == "$JS.API.>" {
			api++
		}
	}
	if api != 1 {
		t.Errorf("%d subscriptions on $JS.API.>, want 1", api)
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// One request at a time, each answer counting the account's API
	// requests so far: a request handled twice is queued in the server
	// with its first copy, so the next answer counts it.
	const requests = 20
	var totals []uint64
	for i := range requests {
		if err := nc.PublishRequest("$JS.API.INFO", inbox, nil); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		var info struct{ API struct{ Total uint64 } }
		if err := json.Unmarshal(m.Data, &info); err != nil {
			t.Fatalf("answer %q: %v", m.Data, err)
		}
		totals = append(totals, info.API.Total)
	}
	if got := totals[requests-1] - totals[0]; got != requests-1 {
		t.Errorf("%d API requests were handled %d times: %v", requests-1, got, totals)
	}
	if extra, _, err := sub.Pending(); err != nil || extra != 0 {
		t.Errorf("%d requests got %d more answers (%v)", requests, extra, err)
	}
}

// TestRestartServer: a restart keeps the listener's port and the
// credentials that go with it, and its reader's account (a line reaches a
// reader live, and the read relay answers), the in-process clients
// reconnect, and
// Close after it shuts the new server down and releases the state dir,
// while a restart after Close is refused.
func TestRestartServer(t *testing.T) {
	cfg := listenConfig(t)
	s := startServer(t, cfg) // closed below too: Close returns its first result again
	// A publish written before the client has seen its old server go is
	// lost with that connection (nats.go drops what it could not flush),
	// and a JetStream publish then waits for its reply to the deadline:
	// the client's callers retry, this test waits for the reconnect.
	reconnected := make(chan struct{}, 1)
	nc, err := s.Connect(nats.ReconnectHandler(func(*nats.Conn) {
		select {
		case reconnected <- struct{}{}:
		default:
		}
	}))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	createStream(t, js, "R")
	localStream(t, js)
	runRelay(t, s)
	url := s.ClientURL()
	first := s.NATS()

	if err := s.restartServer(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if s.NATS() == first || first.Running() {
		t.Fatal("the server was not replaced")
	}
	if got := "nats://" + s.NATS().Addr().String(); got != url || s.ClientURL() != url {
		t.Errorf("listener after restart at %s (ClientURL %s), want %s", got, s.ClientURL(), url)
	}
	select {
	case <-reconnected:
	case <-testCtx(t).Done():
		t.Fatal("the client did not reconnect to the new server")
	}
	if _, err := js.Publish(testCtx(t), "R.1", []byte("x")); err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	reader, err := connectReader(t, s)
	if err != nil {
		t.Fatalf("connect over the listener after the restart: %v", err)
	}
	live, err := reader.SubscribeSync("pi.evt.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(testCtx(t), "pi.evt.n.a", []byte("after")); err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	if m, err := live.NextMsg(10 * time.Second); err != nil || string(m.Data) != "after" {
		t.Fatalf("a reader live after the restart: %v %v", m, err)
	}
	// The relay's in-process connection followed the restart too.
	if m, err := reader.Request("$JS.API.DIRECT.GET.PI_LOCAL", []byte(`{"seq":1}`), 10*time.Second); err != nil || string(m.Data) != "after" {
		t.Fatalf("a direct get after the restart: %v %v", m, err)
	}
	apiAnsweredOnce(t, s, nc)

	nc.Close()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s.NATS().Running() {
		t.Error("the new server runs after Close")
	}
	if err := s.restartServer(); err == nil {
		t.Error("a restart after Close succeeded")
	}
	// The lock was released: the state dir opens again.
	again := startServer(t, cfg)
	if again.ClientURL() == "" {
		t.Error("no listener on the reopened state dir")
	}
}

// TestWatchStoreHubRefused: a hub's clustered store is not restarted.
func TestWatchStoreHubRefused(t *testing.T) {
	s := &Server{}
	if _, err := s.WatchStore(StoreWatchOptions{}); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("WatchStore on a server without a workstation config: %v", err)
	}
}

// TestRestartStartFails: a new server that cannot start (here its store
// dir is a file) fails the restart, which is tried again, and does not
// report the Server broken; the next restart brings the clients back.
func TestRestartStartFails(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, testConfig(t, dir))
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	createStream(t, js, "F")

	store := filepath.Join(dir, "jetstream")
	if err := os.Rename(store, store+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.restartServer(); err == nil {
		t.Fatal("a restart on a store dir that is a file succeeded")
	}
	if err := s.Err(); err != nil {
		t.Errorf("a failed restart reported the server broken: %v", err)
	}
	if err := os.Remove(store); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(store+".away", store); err != nil {
		t.Fatal(err)
	}
	if err := s.restartServer(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if _, err := js.Publish(testCtx(t), "F.1", []byte("x")); err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	if s.Err() != nil {
		t.Errorf("server broken after the restart: %v", s.Err())
	}
}

// TestStoreWatchQuiet: the health check runs after a tick in which an
// in-process client wrote to the server, and not at a tick without one
// (TestPace has the checks of a quiet stretch): four checks a second were
// an idle daemon's largest cost.
func TestStoreWatchQuiet(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	// No quiet checks: only a write makes one.
	w, stop := runWatch(t, s, StoreWatchOptions{Interval: time.Millisecond, QuietTicks: 1 << 30})
	defer stop()
	ticks := func(n int64) {
		t.Helper()
		from := w.ticks.Load()
		waitFor(t, 10*time.Second, "ticks", func() bool { return w.ticks.Load() >= from+n })
	}
	nc := connect(t, s)

	ticks(5) // the connection's own writes are behind
	c := w.checks.Load()
	ticks(200)
	if n := w.checks.Load(); n != c {
		t.Errorf("%d health checks in 200 ticks with nothing written", n-c)
	}
	if err := nc.Publish("x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a check after a write", func() bool { return w.checks.Load() > c })
}

// TestPace: with nothing written the watch checks at every quietTicks-th
// tick and from then on ticks that far apart; a write brings it back to
// a check at every tick.
func TestPace(t *testing.T) {
	p := pace{interval: time.Millisecond, quietTicks: 3}
	type step struct {
		wrote bool
		check bool
		next  time.Duration
	}
	fast, slow := time.Millisecond, 3*time.Millisecond
	for i, s := range []step{
		{true, true, fast},
		{false, false, fast},
		{false, false, fast},
		{false, true, slow}, // the third quiet tick
		{false, true, slow},
		{false, true, slow},
		{true, true, fast}, // a write
		{true, true, fast},
		{false, false, fast},
		{false, false, fast},
		{false, true, slow},
	} {
		if check, next := p.tick(s.wrote); check != s.check || next != s.next {
			t.Errorf("tick %d (wrote %v): check %v, next %v; want %v, %v", i, s.wrote, check, next, s.check, s.next)
		}
	}
}

// TestSuspicionsSpaced: a storm of suspicions on a healthy store (writes
// failing for some other reason, thousands of files retrying) costs a
// probe write a second, not one each, and reports nothing.
func TestSuspicionsSpaced(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	w, stop := runWatch(t, s, StoreWatchOptions{})
	w.Suspect()
	waitFor(t, 10*time.Second, "the first suspicion's probe", func() bool { return w.suspectProbes.Load() == 1 })
	start := time.Now()
	calls := 0
	for time.Since(start) < 1500*time.Millisecond {
		w.Suspect()
		calls++
		time.Sleep(time.Millisecond) // the storm's pace, not synchronisation
	}
	stop()
	// The first probe, and at most two more in 1.5 s a second apart
	// (the next may come any time after the first's second is up).
	if n := w.suspectProbes.Load(); n > 3 {
		t.Errorf("%d probes for %d suspicions in 1.5 s", n, calls)
	}
	if st := w.Stats(); st.State != StoreOK || st.WriteFailures != 0 {
		t.Errorf("a healthy store after suspicions: %+v", st)
	}
}

// TestStoreAtItsLimit: a store that holds its limit (MaxStore) refuses
// every write with "insufficient resources" while the server reports
// itself healthy. Proves that the watch's stats and its writable metric
// say so, with what it holds, and that an erase brings it back. Before,
// status, /healthz and the metric said ok while nothing more was
// published (an operations probe on 2026-12-07, with PISYNC_MAX_STORE).
func TestStoreAtItsLimit(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxStore = 8 << 20
	s := startServer(t, cfg)
	w, stop := runWatch(t, s, StoreWatchOptions{})
	defer stop()
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	st := createStream(t, js, "S")
	if got := w.Stats(); got.State != StoreOK || got.LimitBytes != 8<<20 {
		t.Fatalf("an empty store: %+v", got)
	}
	payload := []byte(strings.Repeat("x", 64<<10))
	var err error
	for i := 0; err == nil; i++ {
		if i > 1000 {
			t.Fatal("128 at most fit; 1000 were stored")
		}
		_, err = js.Publish(testCtx(t), "S.x", payload)
	}
	if !strings.Contains(err.Error(), "insufficient resources") {
		t.Fatalf("the write past the limit: %v", err)
	}
	got := w.Stats()
	if got.State != StoreAtLimit || got.UsedBytes < 7<<20 || !strings.Contains(got.Error, "of its limit of 8388608") {
		t.Errorf("a store at its limit: %+v", got)
	}
	if v := gaugeValue(t, w, "store_writable"); v != 0 {
		t.Errorf("store_writable %v at the limit", v)
	}
	if err := st.Purge(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := w.Stats(); got.State != StoreOK {
		t.Errorf("after a purge: %+v", got)
	}
	if v := gaugeValue(t, w, "store_writable"); v != 1 {
		t.Errorf("store_writable %v after a purge", v)
	}
}

// gaugeValue reads the watch's gauge named name (without its prefix).
func gaugeValue(t *testing.T, w *StoreWatch, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(w.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasSuffix(mf.GetName(), "_"+name) || mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
