package search

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// damageSegments flips bytes a third of the way into every segment file
// of the index in dir, as a bad block would.
func damageSegments(t *testing.T, dir string) {
	t.Helper()
	zaps, err := filepath.Glob(filepath.Join(dir, "store", "*.zap"))
	if err != nil || len(zaps) == 0 {
		t.Fatalf("no segment file in %s (%v)", dir, err)
	}
	for _, z := range zaps {
		b, err := os.ReadFile(z)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(b) / 3; i < len(b)/3+64 && i < len(b); i++ {
			b[i] ^= 0x5a
		}
		if err := os.WriteFile(z, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDamagedSegmentFound: an index whose segment file is damaged on disk.
// An erase on it merges, which fails, and scorch retried the merge for
// ever, each attempt a new file, while the erase waited (a probe's wrote
// 866 MB in 100 s): now the erase ends with its context, the index says
// it failed (Suspect), and Damage names the segment. An index not
// damaged has none to name.
func TestDamagedSegmentFound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "search")
	ix := openTest(t, dir)
	var docs []Doc
	for i := range 2000 {
		docs = append(docs, Doc{SessionID: fmt.Sprintf("s%d", i%50), EntryID: fmt.Sprint(i), Type: "message", Text: fmt.Sprintf("word%d the quick brown fox %d", i, i*7)})
	}
	// One batch, one segment, which the merger leaves alone.
	if err := ix.Write(docs, "PI_LOCAL", 2000); err != nil {
		t.Fatal(err)
	}
	if why, err := ix.Damage(context.Background()); why != "" || err != nil {
		t.Fatalf("a sound index: %q, %v", why, err)
	}
	ix.Close()
	damageSegments(t, dir)
	ix = openTest(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := ix.EraseSession(ctx, "s3"); err == nil {
		t.Fatal("an erase merged a damaged segment without an error")
	}
	select {
	case <-ix.Suspect():
	default:
		t.Error("the failed erase did not make the index suspect")
	}
	why, err := ix.Damage(context.Background())
	if err != nil || !strings.Contains(why, ".zap is damaged") {
		t.Errorf("damage: %q, %v", why, err)
	}
}

// TestWorkerRebuildsDamagedIndex: a worker that finds a segment file
// damaged makes the index again from the stream, and every line is found
// again; one that finds none leaves the index as it is.
func TestWorkerRebuildsDamagedIndex(t *testing.T) {
	r := newRig(t)
	r.publish("s1", session("s1", 200, "alpha")...)
	last := r.publish("s2", session("s2", 30, "beta")...)
	r.waitTotal("alpha", 200)
	r.waitPosition(last)
	r.stopWorker()
	r.startWorker()
	if st := r.w.Stats(); st.Rebuilds != 0 {
		t.Fatalf("a sound index was made again: %+v", st)
	}
	r.stopWorker()
	// One segment, the same bytes every run: where the damage falls is
	// not up to how the worker's batches were merged (bleve loads some
	// parts of a segment at open, and falls back to an older snapshot
	// when one of those is damaged).
	ix, err := Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	damageSegments(t, r.dir)
	var log testenv.LogBuffer
	r.logger = log.Logger()
	r.startWorker()
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
		return r.w.Stats().Rebuilds == 1, fmt.Sprintf("stats %+v", r.w.Stats())
	})
	r.waitTotal("alpha", 200)
	r.waitTotal("beta", 30)
	r.waitPosition(last)
	if why, err := r.ix.Damage(context.Background()); why != "" || err != nil {
		t.Errorf("after the rebuild: %q, %v", why, err)
	}
	if !strings.Contains(log.String(), "the index is damaged") {
		t.Errorf("the log does not say the index was damaged:\n%s", log.String())
	}
}
