package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestPublishOnFullStore: with the store's disk (a real tmpfs) full, a
// publish, single or batch, gives up as soon as the store watch reports it
// (not after the 30 s request timeout: the server never answers), later
// ones fail at once, and once space is freed and the store restarted in
// place the same log publishes again after the last acknowledged line.
func TestPublishOnFullStore(t *testing.T) {
	disk := t.TempDir()
	testenv.Tmpfs(t, disk, 8<<20)
	lg, w := watchedLog(t, disk)
	ctx := context.Background()
	const sid = "s1"

	lines := mkLines(200, 3000, "e")
	last, n, err := lg.Publish(ctx, sid, 0, lines[:10])
	if err != nil || n != 10 {
		t.Fatalf("publish before the disk is full: %d, %v", n, err)
	}
	stored := n

	free := testenv.Fill(t, disk)
	// Singles until one fails: the page the store writes into may still
	// take a few.
	start := time.Now()
	for {
		seq, n, err := lg.Publish(ctx, sid, last, lines[stored:stored+1])
		if err != nil {
			if !errors.Is(err, eventlog.ErrStoreUnavailable) {
				t.Fatalf("publish on a full disk: %v, want ErrStoreUnavailable", err)
			}
			break
		}
		last, stored = seq, stored+n
		if stored > 100 {
			t.Fatal("publishes keep succeeding on a full disk")
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the publish that hit the full disk returned after %v", d)
	}
	// A batch on the known-broken store fails at once, storing nothing.
	t0 := time.Now()
	if _, n, err := lg.Publish(ctx, sid, last, lines[stored:stored+50]); !errors.Is(err, eventlog.ErrStoreUnavailable) || n != 0 {
		t.Fatalf("batch on a failing store: %d stored, %v", n, err)
	}
	if d := time.Since(t0); d > 100*time.Millisecond {
		t.Errorf("a batch on a known-broken store took %v", d)
	}

	free()
	testenv.WaitFor(t, 15*time.Second, func() (bool, string) {
		return w.Writable().Err() == nil, w.Stats().Error
	})
	if _, n, err = lg.Publish(ctx, sid, last, lines[stored:stored+50]); err != nil || n != 50 {
		t.Fatalf("batch after recovery: %d, %v", n, err)
	}
	stored += n
	evs := readAll(t, lg, sid)
	if len(evs) != stored {
		t.Fatalf("the subject holds %d lines, %d were acknowledged", len(evs), stored)
	}
	for i, ev := range evs {
		if ev.Sha != lines[i].Sha {
			t.Fatalf("event %d is not line %d", i, i)
		}
	}
}

// watchedLog starts a server with its store in disk, a store watch over it
// (running until the test ends) and the local log on it, whose publisher
// consults the watch's Writable as the daemon's does.
func watchedLog(t *testing.T, disk string) (*eventlog.Local, *embedded.StoreWatch) {
	t.Helper()
	srv, lg := startLog(t, embedded.Config{StateDir: filepath.Join(disk, "state"), NodeID: "n1"})
	w, err := srv.WatchStore(embedded.StoreWatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })
	lg.SetWritable(w.Writable)
	return lg, w
}

// TestBatchOnFullDiskSuspected: on a full disk an atomic batch fails before
// its stream does (the server stages a batch apart, and calls one it could
// not stage "incomplete"), so the server's health stays good. The failed
// publish makes the store watch probe the disk: the store is reported
// failing with the disk's error, and once space is freed it comes back and
// the same batch is stored.
func TestBatchOnFullDiskSuspected(t *testing.T) {
	disk := t.TempDir()
	testenv.Tmpfs(t, disk, 8<<20)
	lg, w := watchedLog(t, disk)
	lg.SetSuspect(w.Suspect)
	ctx := context.Background()
	lines := mkLines(100, 3000, "b")
	last, n, err := lg.Publish(ctx, "s1", 0, lines[:50])
	if err != nil || n != 50 {
		t.Fatalf("batch before the disk is full: %d, %v", n, err)
	}

	free := testenv.Fill(t, disk)
	if _, n, err := lg.Publish(ctx, "s1", last, lines[50:]); err == nil || n != 0 {
		t.Fatalf("batch on a full disk: %d stored, %v", n, err)
	} else {
		t.Logf("the batch on a full disk: %v", err)
	}
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		st := w.Stats()
		return st.State == embedded.StoreFailing && strings.Contains(st.Error, "no space left"), fmt.Sprintf("%+v", st)
	})
	if _, _, err := lg.Publish(ctx, "s1", last, lines[50:]); !errors.Is(err, eventlog.ErrStoreUnavailable) {
		t.Fatalf("batch on a store reported failing: %v, want ErrStoreUnavailable", err)
	}

	free()
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		return w.Writable().Err() == nil, w.Stats().Error
	})
	if _, n, err := lg.Publish(ctx, "s1", last, lines[50:]); err != nil || n != 50 {
		t.Fatalf("batch after recovery: %d, %v", n, err)
	}
	if evs := readAll(t, lg, "s1"); len(evs) != len(lines) {
		t.Fatalf("the subject holds %d lines, want %d", len(evs), len(lines))
	}
	if st := w.Stats(); st.WriteFailures != 1 || st.Recoveries != 1 {
		t.Errorf("store stats after the outage: %+v", st)
	}
}
