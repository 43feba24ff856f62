package embedded

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestStoreWatchRecoversInPlace fills the real (tmpfs) disk under the
// store: the watch must report the write error at once, keep reporting it
// while the disk is full, and once space is freed restart JetStream in the
// same server, so that the same connection publishes again and the stream
// holds everything acknowledged before, during and after.
func TestStoreWatchRecoversInPlace(t *testing.T) {
	disk := t.TempDir()
	testenv.Tmpfs(t, disk, 8<<20)
	s := startServer(t, testConfig(t, filepath.Join(disk, "state")))
	var recovered, resumed atomic.Int64
	w, err := s.WatchStore(StoreWatchOptions{
		Logger:    testConfig(t, disk).Logger,
		Recovered: func(context.Context) error { recovered.Add(1); return nil },
		Resumed:   func() { resumed.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	st := createStream(t, js, "S")
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
}

// TestStoreWatchJetStreamOff: the server turns JetStream off by itself on
// some write errors; the watch turns it on again.
func TestStoreWatchJetStreamOff(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	w, err := s.WatchStore(StoreWatchOptions{Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
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
}

// TestWatchStoreHubRefused: a hub's clustered store is not restarted.
func TestWatchStoreHubRefused(t *testing.T) {
	s := &Server{}
	if _, err := s.WatchStore(StoreWatchOptions{}); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("WatchStore on a server without a workstation config: %v", err)
	}
}
