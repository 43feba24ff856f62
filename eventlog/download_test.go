package eventlog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// hubAndLeaf starts an open hub with PI_HUB and a workstation server that
// joins it as a leaf, with PI_ALL.
func hubAndLeaf(tb testing.TB) (hubJS jetstream.JetStream, ws *embedded.Server, all *eventlog.All) {
	tb.Helper()
	return hubAndLeafThrough(tb, func(leaf string) string { return leaf })
}

// hubAndLeafThrough is hubAndLeaf with the workstation dialling the address
// through returns for the hub's leaf listener (a proxy in between).
func hubAndLeafThrough(tb testing.TB, through func(leaf string) string) (hubJS jetstream.JetStream, ws *embedded.Server, all *eventlog.All) {
	tb.Helper()
	ctx := context.Background()
	leaf := testenv.FreeAddr(tb)
	hub, err := embedded.StartHub(ctx, embedded.HubConfig{StateDir: tb.TempDir(), Name: "h", LeafListen: leaf})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { hub.Close() })
	hnc, err := hub.Connect()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(hnc.Close)
	hubJS, _ = jetstream.New(hnc)
	if _, err := eventlog.EnsureStream(ctx, hubJS, eventlog.HubStreamConfig(1)); err != nil {
		tb.Fatal(err)
	}
	// Tests run the link without compression: under -race nats-server's
	// S2 writer allocates a fresh 1.2 MB buffer about every fourth flush
	// (sync.Pool drops a quarter of what is put back), and lines sent one
	// by one took 40 times as long (docs/PERFORMANCE.md, "The hub link's
	// compression"). A benchmark keeps the default.
	compression := "off"
	if _, bench := tb.(*testing.B); bench {
		compression = ""
	}
	ws, err = embedded.Start(ctx, embedded.Config{StateDir: tb.TempDir(), NodeID: "w1", HubURLs: []string{"nats://" + through(leaf)}, HubCompression: compression})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ws.Close() })
	wnc, err := ws.Connect()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(wnc.Close)
	// The leaf connects before its JetStream route to the hub domain is
	// known on this side; under load a request can meet "no responders"
	// for a moment. Every test here talks to the hub through the leaf, so
	// wait for that route to answer first.
	wHub, _ := jetstream.NewWithDomain(wnc, embedded.HubDomain)
	testenv.WaitFor(tb, 30*time.Second, func() (bool, string) {
		_, err := wHub.AccountInfo(ctx)
		return err == nil, fmt.Sprintf("the hub's JetStream through the leaf: %v", err)
	})
	js, _ := jetstream.New(wnc)
	if all, err = eventlog.OpenAll(ctx, js); err != nil {
		tb.Fatal(err)
	}
	return hubJS, ws, all
}

func allCount(tb testing.TB, all *eventlog.All) uint64 {
	info, err := all.Stream().Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Msgs
}

// TestDownloaderCopiesExactlyOnce: the hub's lines land in PI_ALL in hub
// order, split lines whole, and restarting the downloader copies nothing
// twice.
func TestDownloaderCopiesExactlyOnce(t *testing.T) {
	hubJS, ws, all := hubAndLeaf(t)
	ctx := context.Background()
	hnc := hubJS.Conn()
	pub := eventlog.NewPublisher(hnc, hubJS, 10*time.Second)
	last := uint64(0)
	var err error
	lines := append(mkLines(50, 100, "a"), mkLines(1, 3*eventlog.MaxChunk, "big")...)
	if last, _, err = pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), last, lines); err != nil {
		t.Fatal(err)
	}
	run := func() (stop func()) { return runDownloader(t, ws, all, nil, nil) }
	stop := run()
	want := uint64(50 + 4)
	waitCount(t, all, want)
	stop()
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), last, mkLines(3, 10, "b")); err != nil {
		t.Fatal(err)
	}
	stop = run()
	defer stop()
	waitCount(t, all, want+3)
	var n int
	err = eventlog.ReadFiltered(ctx, all.JetStream(), eventlog.AllStream, eventlog.SessionFilter("s1"), want+3, false, func(ev *eventlog.Event) error {
		if ev.Node != "n2" || ev.SID != "s1" {
			t.Errorf("event of %s/%s", ev.Node, ev.SID)
		}
		n++
		return nil
	})
	if err != nil || n != 54 {
		t.Fatalf("read %d lines back (want 54): %v", n, err)
	}
}

// runDownloader starts a downloader over a new connection of ws into all,
// admitting with gate (every line, when nil) and keeping its skip position
// in state (none, when nil); stop ends it and checks it returned cleanly.
func runDownloader(t *testing.T, ws *embedded.Server, all *eventlog.All, gate *admit.Gate, state jetstream.KeyValue) (stop func()) {
	t.Helper()
	return runDownloaderWatching(t, ws, all, gate, state, ws.HubLink)
}

// runDownloaderWatching is runDownloader with the downloader watching the
// hub link through link (nil: it does not, and knows only silence).
func runDownloaderWatching(t *testing.T, ws *embedded.Server, all *eventlog.All, gate *admit.Gate, state jetstream.KeyValue, link func() string) (stop func()) {
	t.Helper()
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	if gate == nil {
		gate = admit.New("w1", admit.Limits{}, all, nil)
	}
	d, err := eventlog.NewDownloader(nc, all, embedded.HubDomain, eventlog.DownloaderOptions{Admit: gate, State: state, MaxLine: 1 << 20, HubLink: link})
	if err != nil {
		t.Fatal(err)
	}
	run := goRun(t, d)
	return func() {
		run()
		nc.Close()
	}
}

// goRun runs d until stop, which checks that it returned cleanly.
func goRun(t *testing.T, d interface{ Run(context.Context) error }) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func waitCount(t testing.TB, all *eventlog.All, want uint64) {
	t.Helper()
	waitCountWithin(t, all, want, 30*time.Second)
}

// waitCountWithin waits at most d for PI_ALL to hold want messages, and
// fails at once if it holds more.
func waitCountWithin(t testing.TB, all *eventlog.All, want uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if n := allCount(t, all); n == want {
			return
		} else if n > want {
			t.Fatalf("PI_ALL holds %d messages, want %d: duplicates", n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("PI_ALL holds %d messages, want %d", allCount(t, all), want)
}

// BenchmarkDownload: catch-up rate of the downloader, hub → PI_ALL, as a
// ratio to publishing the same messages into PI_HUB in atomic batches in
// the same run.
func BenchmarkDownload(b *testing.B) {
	const n = 20000
	for i := 0; i < b.N; i++ {
		hubJS, ws, all := hubAndLeaf(b)
		ctx := context.Background()
		pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 30*time.Second)
		t0 := time.Now()
		for s := 0; s < 10; s++ {
			if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", fmt.Sprint("s", s)), 0, mkLines(n/10, 200, "x")); err != nil {
				b.Fatal(err)
			}
		}
		base := time.Since(t0)
		nc, _ := ws.Connect()
		d, _ := eventlog.NewDownloader(nc, all, embedded.HubDomain, eventlog.DownloaderOptions{Admit: admit.New("w1", admit.Limits{}, all, nil)})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		t1 := time.Now()
		go func() { done <- d.Run(rctx) }()
		waitCount(b, all, n)
		took := time.Since(t1)
		cancel()
		<-done
		nc.Close()
		b.ReportMetric(float64(n)/took.Seconds(), "lines/s")
		b.ReportMetric(float64(n)/base.Seconds(), "baseline-batch-publish-lines/s")
		b.ReportMetric(base.Seconds()/took.Seconds(), "x-baseline")
	}
}

// TestDownloaderAfterErase: once a session is erased from PI_ALL (its
// lines the last ones copied) and from the hub up to its erase event, a
// restarted downloader resumes after the last message PI_ALL still holds:
// it copies the erase event and what follows, nothing twice, and none of
// the erased lines.
func TestDownloaderAfterErase(t *testing.T) {
	hubJS, ws, all := hubAndLeaf(t)
	ctx := context.Background()
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "keep"), 0, mkLines(5, 10, "k")); err != nil {
		t.Fatal(err)
	}
	_, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "gone"), 0, mkLines(4, 10, "g"))
	if err != nil {
		t.Fatal(err)
	}
	run := func() (stop func()) { return runDownloader(t, ws, all, nil, nil) }
	stop := run()
	waitCount(t, all, 9)
	stop()
	// Erased here (the last messages PI_ALL holds), then the hub gets
	// the erase event and erases up to it; more lines follow.
	if n, err := eventlog.Erase(ctx, all.Stream(), eventlog.SessionFilter("gone"), 0); err != nil || n != 4 {
		t.Fatalf("erase in PI_ALL: %d, %v", n, err)
	}
	// The erase event is this node's own (its user erased the session
	// here): admission takes it although PI_ALL no longer holds a line
	// of the session. This node wrote in the session too, which hub erase
	// wants of the node whose erase event it takes (a node that only held
	// a copy has no say).
	w1last, _, err := pub.Publish(ctx, eventlog.UpSubject("w1", "gone"), 0, mkLines(1, 10, "w"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("w1", "gone"), w1last, []eventlog.Line{eventlog.EraseLine("p/g.jsonl", time.Now())}); err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.EraseHub(ctx, hubJS, "gone", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "keep2"), 0, mkLines(2, 10, "l")); err != nil {
		t.Fatal(err)
	}
	stop = run()
	defer stop()
	waitCount(t, all, 5+1+2)
	var ops []string
	err = eventlog.ReadFiltered(ctx, all.JetStream(), eventlog.AllStream, eventlog.SessionFilter("gone"), 1<<62, false, func(ev *eventlog.Event) error {
		ops = append(ops, ev.Op)
		return nil
	})
	if err != nil || len(ops) != 1 || ops[0] != eventlog.OpErase {
		t.Fatalf("PI_ALL holds %q of the erased session (%v), want its erase event only", ops, err)
	}
}

// TestDownloaderHintsStored: the messages All.Stored hands over are those
// PI_ALL holds, at the same sequences, with the same subjects, headers and
// payloads (the replicator takes them in place of its consumer's
// deliveries). Hints may be dropped when the reader is busy (the channel
// holds a few writes), so a reader takes them as they come, and the test
// asks for the last write's hint and every hint to be right.
func TestDownloaderHintsStored(t *testing.T) {
	hubJS, ws, all := hubAndLeaf(t)
	ctx := context.Background()
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	hints := make(chan []jetstream.Msg, 64)
	rctx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	go func() {
		for {
			select {
			case h := <-all.Stored():
				hints <- h
			case <-rctx.Done():
				return
			}
		}
	}()
	stop := runDownloader(t, ws, all, nil, nil)
	defer stop()
	last := uint64(0)
	var err error
	for i := range 5 { // live lines, one at a time, and a small batch
		lines := mkLines(1+3*(i%2), 100, fmt.Sprintf("l%d", i))
		if last, _, err = pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), last, lines); err != nil {
			t.Fatal(err)
		}
	}
	waitCount(t, all, 11)
	var prev uint64 // the last sequence handed over
	for prev < 11 {
		var hint []jetstream.Msg
		select {
		case hint = <-hints:
		case <-time.After(30 * time.Second):
			t.Fatalf("no hint for PI_ALL's last write (handed over up to %d of 11)", prev)
		}
		for _, h := range hint {
			meta, _ := h.Metadata()
			m, err := all.Stream().GetMsg(ctx, meta.Sequence.Stream)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject != h.Subject() || string(m.Data) != string(h.Data()) || m.Header.Get(eventlog.HdrHubSeq) != h.Headers().Get(eventlog.HdrHubSeq) || m.Header.Get(eventlog.HdrSha) != h.Headers().Get(eventlog.HdrSha) {
				t.Fatalf("hint at %d differs from PI_ALL's message", meta.Sequence.Stream)
			}
			if meta.Sequence.Stream <= prev {
				t.Fatalf("hint at sequence %d after %d: out of order", meta.Sequence.Stream, prev)
			}
			prev = meta.Sequence.Stream
		}
	}
}

// TestDownloaderPullLostWithTheLeaf: a line published on the hub while the
// leaf link is down for a moment reaches PI_ALL soon after the link is
// back. The hub dropped the downloader's waiting pull without a word (no
// interest in its reply subject while the link was down), and nats.go
// pulls again only after two missed heartbeats: 30 s with the default
// heartbeat of a 30 s pull (27.6 s measured before the first fix, a 2 s
// heartbeat; now the link's change).
func TestDownloaderPullLostWithTheLeaf(t *testing.T) {
	if testing.Short() {
		t.Skip("ages a pull past the hub's 2 s grace")
	}
	_, ws, all, pub, last := idleDownloader(t, true)
	ctx := context.Background()
	// The hub keeps a pull it sees no interest for during its first 2 s
	// (the interest may still be on its way): let the waiting pull age
	// past that. Not a synchronisation: the scenario is an older pull.
	time.Sleep(2500 * time.Millisecond)
	cutLeaf(t, ws)
	// Published while the link is down: the hub finds the pull without
	// interest and drops it.
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), last, mkLines(1, 100, "b")); err != nil {
		t.Fatal(err)
	}
	// The link comes back within a second (the leaf's reconnect
	// interval), and the downloader, seeing it made again, pulls afresh
	// within another (its look at the link). 15 s is far from both, and
	// half of what nats.go's missed heartbeats need (30 s with the 15 s
	// heartbeat the downloader asks for).
	testenv.WaitFor(t, 15*time.Second, func() (bool, string) {
		n := allCount(t, all)
		return n == 6, fmt.Sprintf("the line published while the leaf was down in PI_ALL (%d of 6 messages)", n)
	})
}

// TestDownloaderHubConsumerGoneSilently: the hub loses the downloader's
// consumer while the node cannot hear it say so (the hub restarted or the
// consumer was removed while the leaf link was down: a hub that crashed
// never says so at all). The pulls nats.go sends again after missed
// heartbeats then go to a consumer that is not there, and nothing answers
// them; an idle downloader used to wait on them for ever. It must notice
// and make its consumer again.
func TestDownloaderHubConsumerGoneSilently(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out missed heartbeats")
	}
	hubJS, ws, all, pub, last := idleDownloader(t, true)
	ctx := context.Background()
	cutLeaf(t, ws)
	// While the link is down (it comes back after the leaf's reconnect
	// interval, a second), the consumer goes: whatever the hub says about
	// it has no way to the node.
	s, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	names := s.ConsumerNames(ctx)
	deleted := 0
	for name := range names.Name() {
		if err := s.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
		deleted++
	}
	if deleted != 1 {
		t.Fatalf("deleted %d consumers on the hub, want the downloader's one", deleted)
	}
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), last, mkLines(1, 100, "b")); err != nil {
		t.Fatal(err)
	}
	// The downloader sees the link made again and makes its consumer
	// again once the link is back: far within waitCount's 30 s.
	waitCount(t, all, 6)
}

// TestDownloaderLineLostOnTheWay: the hub's consumer hands a line to a
// pull other than the downloader's (here a thief's on the hub; in life
// the downloader's own, sent as the leaf link went down and lost with
// it). With no acks the hub never sends it again, and with no line after
// it nothing shows the gap. A downloader watching the link pulls afresh
// once it has been made again; one that cannot tell (the silence alone)
// asks the hub how far its consumer got after 30 s of silence, and finds
// it delivered past the last line that arrived.
func TestDownloaderLineLostOnTheWay(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the downloader's watchdog")
	}
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("watching the link %v", watch), func(t *testing.T) { lineLostOnTheWay(t, watch) })
	}
}

func lineLostOnTheWay(t *testing.T, watch bool) {
	hubJS, ws, all, pub, last := idleDownloader(t, watch)
	ctx := context.Background()
	s, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for n := range s.ConsumerNames(ctx).Name() {
		name = n
	}
	cons, err := s.Consumer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// The downloader's pull stops hearing the hub, so that the thief's
	// is the one the line goes to (or the line is lost with the link).
	cutLeaf(t, ws)
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), last, mkLines(1, 100, "b")); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
	}
	if info, err := cons.Info(ctx); err != nil || info.Delivered.Stream != last+1 {
		t.Fatalf("the hub consumer's delivered state %+v (%v): want the line delivered", info, err)
	}
	// The line the downloader never received: at once with the link
	// watched, after the 30 s of silence without.
	waitCountWithin(t, all, 6, 60*time.Second)
}

// idleDownloader runs a downloader (stopped at the test's end), watching
// the hub link or not (silence alone), that has copied the five lines
// published on the hub subject of n2's session s1, and returns the hub,
// PI_ALL, a publisher on the hub and the subject's last sequence.
func idleDownloader(t *testing.T, watch bool) (hubJS jetstream.JetStream, ws *embedded.Server, all *eventlog.All, pub *eventlog.Publisher, last uint64) {
	t.Helper()
	hubJS, ws, all = hubAndLeaf(t)
	pub = eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	last, _, err := pub.Publish(context.Background(), eventlog.UpSubject("n2", "s1"), 0, mkLines(5, 100, "a"))
	if err != nil {
		t.Fatal(err)
	}
	var link func() string
	if watch {
		link = ws.HubLink
	}
	t.Cleanup(runDownloaderWatching(t, ws, all, nil, nil, link))
	waitCount(t, all, 5)
	return hubJS, ws, all, pub, last
}

// cutLeaf closes ws's leaf connections to the hub; ws makes them again
// after the leaf's reconnect interval (a second).
func cutLeaf(t *testing.T, ws *embedded.Server) {
	t.Helper()
	lz, err := ws.NATS().Leafz(&server.LeafzOptions{})
	if err != nil || len(lz.Leafs) == 0 {
		t.Fatalf("no leaf connection: %v", err)
	}
	for _, l := range lz.Leafs {
		if err := ws.NATS().DisconnectClientByID(l.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLineLongerThanHereNamesTheSetting: a line longer than this machine's
// PISYNC_MAX_LINE (a teammate's is larger) is passed over as too long,
// naming the setting and what copies such lines, in one chunk or in many,
// and the lines around it are copied. Before, a line of many chunks was
// "a broken chunk run" naming chunk counts (a probe, 2026-12-07).
func TestLineLongerThanHereNamesTheSetting(t *testing.T) {
	hubJS, ws, all := hubAndLeaf(t)
	ctx := context.Background()
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	const maxLine = 64 << 10
	var lines []eventlog.Line
	lines = append(lines, mkLines(1, 100, "before")...)
	lines = append(lines, mkLines(1, 100<<10, "one")...)              // one chunk, past maxLine
	lines = append(lines, mkLines(1, 3*eventlog.MaxChunk, "many")...) // four chunks, past the two maxLine allows
	lines = append(lines, mkLines(1, 100, "after")...)
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), 0, lines); err != nil {
		t.Fatal(err)
	}
	var log testenv.LogBuffer
	gate := admit.New("w1", admit.Limits{MaxLine: maxLine}, all, log.Logger())
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	d, err := eventlog.NewDownloader(nc, all, embedded.HubDomain, eventlog.DownloaderOptions{Admit: gate, MaxLine: maxLine, HubLink: ws.HubLink})
	if err != nil {
		t.Fatal(err)
	}
	stop := goRun(t, d)
	defer stop()
	waitCount(t, all, 2)
	testenv.WaitFor(t, 10*time.Second, func() (bool, string) {
		st := gate.Stats()
		return st.ByOrigin["n2"].ByReason[admit.TooLong] == 2, fmt.Sprintf("%+v", st)
	})
	if !strings.Contains(log.String(), "longer than this machine's PISYNC_MAX_LINE (65536 bytes): not copied here, now or later; raise PISYNC_MAX_LINE here") {
		t.Errorf("the rejection does not name the setting:\n%s", log.String())
	}
}
