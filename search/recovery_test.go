package search

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestWorkerPauseAndRecoveryLogged: an index on a disk that fills up
// stops taking batches; the worker says it paused and retries, and once
// there is room again and a batch is written it says it works again (it
// said nothing before: the log's outage had no end), and the lines that
// came meanwhile are found.
func TestWorkerPauseAndRecoveryLogged(t *testing.T) {
	r := newRig(t)
	r.stopWorker()
	mnt := filepath.Join(t.TempDir(), "mnt")
	testenv.Tmpfs(t, mnt, 8<<20)
	r.dir = filepath.Join(mnt, "search")
	logs := &testenv.LogBuffer{}
	r.logger = logs.Logger()
	r.startWorker()
	r.publish("s1", session("s1", 20, "before")...)
	r.waitTotal("before", 20)

	free := testenv.Fill(t, mnt)
	// Lines until a batch fails: the index may still have room in its
	// open segment for a few.
	i := 0
	for ; !strings.Contains(logs.String(), "search indexing paused; retrying"); i++ {
		if i == 200 {
			t.Fatalf("no pause logged after 200 batches on a full disk:\n%s", logs.String())
		}
		sid := fmt.Sprintf("during%d", i) // lines never published before
		r.publish(sid, session(sid, 20, "during")...)
		time.Sleep(10 * time.Millisecond) // a writer's pace, not synchronisation
	}
	t.Logf("the pause was logged after %d sessions written on the full disk", i)
	free()
	r.publish("s3", session("s3", 20, "after")...)
	r.waitTotal("after", 20)
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "search indexing works again"), "no recovery logged:\n" + logs.String()
	})
}

// TestFailedBatchStaysUnindexed: the lines of a batch the worker could not
// write are read again by the follower's next attempt; between the two
// they still count as unindexed (a search then says the index lags)
// rather than as written. Every batch fails for certain here: the
// worker's Foreground refuses each one, as a full disk would (a full
// tmpfs did not fail for certain: bleve's merges free room and batches go
// in).
func TestFailedBatchStaysUnindexed(t *testing.T) {
	r := newRig(t)
	r.stopWorker()
	gate := &refusingGate{}
	r.fg = gate
	logs := &testenv.LogBuffer{}
	r.logger = logs.Logger()
	r.startWorker()
	r.publish("s1", session("s1", 5, "before")...)
	r.waitTotal("before", 5)
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
		n, err := r.w.Unindexed(context.Background())
		return err == nil && n == 0, fmt.Sprintf("unindexed %d (%v) before batches fail", n, err)
	})

	gate.refuse.Store(true)
	lines := session("s2", 20, "during")
	r.publish("s2", lines...)
	// An attempt that began reading once every line was there, and failed
	// (the first may have read while they were being published: it counts
	// only those pending then, until the next attempt reads them).
	after := gate.refused.Load()
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
		return gate.refused.Load() >= after+2, "no batch refused again:\n" + logs.String()
	})
	if !strings.Contains(logs.String(), "search indexing paused; retrying") {
		t.Errorf("the failed batches were not logged:\n%s", logs.String())
	}
	// The follower is between attempts (its backoff, from 100 ms up) or
	// reading the lines again: each sample must count all of them (one
	// less while a line is between read and counted as held). Without the
	// count, a sample in a backoff read only the lines pending past the
	// failed batch.
	short := []int64{}
	for range 60 {
		n, err := r.w.Unindexed(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n < int64(len(lines))-1 {
			short = append(short, n)
		}
		time.Sleep(5 * time.Millisecond) // a sampling pace, not synchronisation
	}
	if len(short) > 0 {
		t.Errorf("%d of 60 samples of Unindexed counted fewer than the %d lines no batch could write: %v", len(short), len(lines), short[:min(len(short), 5)])
	}
	gate.refuse.Store(false)
	r.waitTotal("during", 20)
}

// refusingGate is a worker's Foreground that refuses every batch while
// refuse is set, counting them.
type refusingGate struct {
	refuse  atomic.Bool
	refused atomic.Int64 // batches refused
}

func (g *refusingGate) Wait(ctx context.Context, _ time.Duration) error {
	if g.refuse.Load() {
		g.refused.Add(1)
		return errors.New("test: batches are refused")
	}
	return ctx.Err()
}
