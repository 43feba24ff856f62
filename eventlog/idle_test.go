package eventlog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestDownloaderIdleAfterBacklog: the downloader says it is idle only once
// the backlog the hub held is stored: not between its rounds, where a
// daemon waiting for it (cmd/pisyncd quiet) would give its memory back in
// the middle of the work, and not before its first copy heard from the hub.
func TestDownloaderIdleAfterBacklog(t *testing.T) {
	hubJS, ws, all := hubAndLeaf(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	const n = 5000 // rounds of eventlog.MaxBatch at most
	var last uint64
	for i := 0; i < n; i += eventlog.MaxBatch {
		var err error
		if last, _, err = pub.Publish(ctx, eventlog.UpSubject("n2", "s1"), last, mkLines(eventlog.MaxBatch, 100, fmt.Sprintf("r%d-", i))); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	d, err := eventlog.NewDownloader(nc, all, embedded.HubDomain, eventlog.DownloaderOptions{
		Admit: admit.New("w1", admit.Limits{}, all, nil), MaxLine: 1 << 20, HubLink: ws.HubLink,
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.Idle():
		t.Fatal("idle before the first copy heard from the hub")
	default:
	}
	if !runUntilIdle(t, d) {
		t.Fatalf("not idle a minute after it started; PI_ALL holds %d of %d", allCount(t, all), n)
	}
	if got := allCount(t, all); got != n {
		t.Fatalf("idle with %d of the hub's %d lines stored", got, n)
	}
}

// TestDownloaderIdleWithoutHub: a downloader whose hub is out of reach is
// idle once its copy failed, so a daemon cut off from its hub still counts
// itself quiet.
func TestDownloaderIdleWithoutHub(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, err := embedded.Start(ctx, embedded.Config{StateDir: t.TempDir(), NodeID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	all, err := eventlog.OpenAll(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	d, err := eventlog.NewDownloader(nc, all, embedded.HubDomain, eventlog.DownloaderOptions{Admit: admit.New("w1", admit.Limits{}, all, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if !runUntilIdle(t, d) {
		t.Fatal("not idle a minute after its first copy could not reach a hub")
	}
}

// runUntilIdle runs d until the test ends, and reports whether it was idle
// within a minute.
func runUntilIdle(t *testing.T, d *eventlog.Downloader) bool {
	t.Cleanup(goRun(t, d))
	select {
	case <-d.Idle():
		return true
	case <-time.After(time.Minute):
		return false
	}
}

// TestForwarderBusyWithBacklog: the forwarder says it is busy from the
// first window of a backlog it sends (the search index's batches wait on
// it) until the hub holds the backlog, and idle outside a pass.
func TestForwarderBusyWithBacklog(t *testing.T) {
	hubJS, ws, _ := hubAndLeaf(t)
	ctx := context.Background()
	nc, local := localOn(t, ws, "w1")
	const n = 5000 // windows of 1000 at most: the first has more behind it
	if _, _, err := local.Publish(ctx, "s1", 0, mkLines(n, 100, "b")); err != nil {
		t.Fatal(err)
	}
	// Every line the hub is sent is seen here, before it is stored.
	sub, err := hubJS.Conn().SubscribeSync(eventlog.UpPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	state, err := eventlog.OpenState(ctx, local.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	f, err := eventlog.NewForwarder(local, nc, embedded.HubDomain, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.WatchLink(ws.HubLink)
	select {
	case <-f.Idle():
	default:
		t.Fatal("busy before it ran")
	}
	defer goRun(t, f)()
	if _, err := sub.NextMsg(time.Minute); err != nil {
		t.Fatalf("no line reached the hub within a minute: %v", err)
	}
	select {
	case <-f.Idle():
		t.Fatalf("idle while the hub was sent the first window of a backlog of %d", n)
	default:
	}
	sub.Unsubscribe()
	select {
	case <-f.Idle():
	case <-time.After(time.Minute):
		t.Fatal("still busy a minute after it started")
	}
	hub, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := hub.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Fatalf("idle with %d of %d lines on the hub", info.State.Msgs, n)
	}
}
