package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestStagedBatchStoredWhole: an atomic batch that the disk filled under
// while the stream stored it stays staged (the stream's batches folder)
// until the server restarts, which writes what the stream lacks of it and
// then removes the staged copy, whether the rest fit or not. So the watch
// restarts the server only once the disk has room for the staged batch as
// well as for its probe, and says how much to free; the batch is then
// stored whole. Before, a megabyte free was enough: the restart wrote what
// fit of the batch, dropped the rest, and the error said only "no space
// left on device" (a disk probe, 2026-12-07).
func TestStagedBatchStoredWhole(t *testing.T) {
	disk := t.TempDir()
	testenv.Tmpfs(t, disk, 8<<20)
	state := filepath.Join(disk, "state")
	s := startServer(t, testConfig(t, state))
	w, stop := runWatch(t, s, StoreWatchOptions{Logger: testConfig(t, disk).Logger})
	defer stop()
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	st, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{Name: "S", Subjects: []string{"S.>"}, Storage: jetstream.FileStorage, AllowAtomicPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	free, err := freeBytes(disk)
	if err != nil {
		t.Fatal(err)
	}
	// 3 MiB left: a 2.4 MB batch is staged whole, and the stream's copy
	// of it does not fit.
	filler := filepath.Join(disk, "filler")
	fill := free - (3 << 20)
	if err := os.WriteFile(filler, make([]byte, fill), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 60
	payload := []byte(strings.Repeat("y", 40<<10))
	for i := 1; i <= n; i++ {
		m := nats.NewMsg("S.x")
		m.Data = payload
		m.Header.Set("Nats-Batch-Id", "b1")
		m.Header.Set("Nats-Batch-Sequence", fmt.Sprint(i))
		if i < n {
			if err := nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		if r, err := nc.RequestMsg(m, 5*time.Second); err == nil && !strings.Contains(string(r.Data), "error") {
			t.Fatalf("the batch was stored on a disk without room for it: %s", r.Data)
		}
	}
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		stats := w.Stats()
		return stats.State == StoreFailing && stagedBytes(state) > 0, fmt.Sprintf("staged %d, %+v", stagedBytes(state), stats)
	})
	shrink := func(by int64) {
		t.Helper()
		fill -= by
		if err := os.Truncate(filler, fill); err != nil {
			t.Fatal(err)
		}
	}
	// A megabyte and a little: the probe fits, the batch would not.
	shrink(probeSize + 64<<10)
	var more int64
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		stats := w.Stats()
		_, after, ok := strings.Cut(stats.Error, ": free ")
		if ok {
			fmt.Sscanf(after, "%d more", &more)
		}
		return stats.State == StoreFailing && more > 0 && strings.Contains(stats.Error, "a batch it began to store"), fmt.Sprintf("%+v", stats)
	})
	shrink(more)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		return w.Writable().Err() == nil && stagedBytes(state) == 0, fmt.Sprintf("staged %d bytes, %+v", stagedBytes(state), w.Stats())
	})
	if info, err := st.Info(testCtx(t)); err != nil || info.State.Msgs != n {
		t.Fatalf("the stream holds %d messages of the batch of %d (%v)", info.State.Msgs, n, err)
	}
	if _, err := js.Publish(testCtx(t), "S.after", []byte("fits")); err != nil {
		t.Fatalf("a publish after the restart: %v", err)
	}
}

// TestNeedSpaceSaysHowMuch: a probe the disk refused says how much more
// must be free, and what staged batches hold.
func TestNeedSpaceSaysHowMuch(t *testing.T) {
	probeErr := fmt.Errorf("probe: write x: %w", syscall.ENOSPC)
	err := needSpace(probeErr, 900<<10, 0)
	if !strings.Contains(err.Error(), fmt.Sprintf("free %d more", probeSize-900<<10)) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("%v", err)
	}
	if err := needSpace(probeErr, 100, 200); !strings.Contains(err.Error(), "the 200 bytes of a batch it began to store") || !strings.Contains(err.Error(), fmt.Sprintf("free %d more", probeSize+100)) {
		t.Errorf("%v", err)
	}
	if other := fmt.Errorf("probe: %w", syscall.EIO); needSpace(other, 0, 0) != other {
		t.Errorf("an error other than a full disk was changed")
	}
}
