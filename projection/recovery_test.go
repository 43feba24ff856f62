package projection

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestPauseAndRecoveryLogged: a projection whose views cannot be written
// (the bucket's store refuses them: here its limit, in life a full disk)
// says it paused and retries; once they are written it says it works
// again, so that the outage in the log has an end, and the views are
// whole.
func TestPauseAndRecoveryLogged(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	first := "0199bbbb-0000-7000-8000-00000000000a"
	writeFile(t, filepath.Join(root, "--p--", "2026-11-29T23-08-16-463Z_"+first+".jsonl"), linear(first, 5, 10))
	n := startNode(t, root, state)
	waitEntries(t, n, first, 5)

	n.stopWorker()
	logs := &testenv.LogBuffer{}
	n.logger = logs.Logger()
	ctx := context.Background()
	js, _ := jetstream.New(n.nc)
	limit := func(maxBytes int64) {
		t.Helper()
		s, err := js.Stream(ctx, "KV_"+Bucket)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.MaxBytes = maxBytes
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	limit(1) // nothing more fits
	n.startWorker()
	second := "0199bbbb-0000-7000-8000-00000000000b"
	writeFile(t, filepath.Join(root, "--p--", "2026-11-29T23-09-16-463Z_"+second+".jsonl"), linear(second, 7, 10))
	waitFor(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "projection paused; retrying"), "no pause logged:\n" + logs.String()
	})
	limit(-1)
	waitEntries(t, n, second, 7)
	waitFor(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "projection works again"), "no recovery logged:\n" + logs.String()
	})
	if c := strings.Count(logs.String(), "projection works again"); c != 1 {
		t.Fatalf("the recovery logged %d times:\n%s", c, logs.String())
	}
}

// waitEntries waits until the catalog counts entries for session sid.
func waitEntries(t *testing.T, n *node, sid string, entries int) {
	t.Helper()
	waitFor(t, 20*time.Second, func() (bool, string) {
		c, ok := n.catalogEntry(sid)
		return ok && c.Entries == entries, fmt.Sprintf("%s in the catalog %v, %d entries, want %d", sid, ok, c.Entries, entries)
	})
}
