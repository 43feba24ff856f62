package projection

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/jstest"
)

// TestBucketRePublish: the bucket republishes each value for the local
// listener's readers when opened live, from its creation or when an
// existing one is opened so, and stops when opened otherwise; its other
// settings stay as they are (a limit set by hand).
func TestBucketRePublish(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, js := jstest.Start(t, embedded.Config{NodeID: testNode})
	check := func(live bool, maxBytes int64) {
		t.Helper()
		if _, err := openBucket(ctx, js, live); err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, "KV_"+Bucket)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		if rp := cfg.RePublish; (rp != nil) != live || (live && rp.Destination != "pi.live.kv.>") || cfg.MaxBytes != maxBytes || cfg.PersistMode != jetstream.AsyncPersistMode {
			t.Errorf("bucket opened live=%v: republish %+v, max bytes %d, persist %v", live, rp, cfg.MaxBytes, cfg.PersistMode)
		}
	}
	check(true, -1) // created so
	s, _ := js.Stream(ctx, "KV_"+Bucket)
	cfg := s.CachedInfo().Config
	cfg.MaxBytes = 1 << 20
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	check(false, 1<<20)
	check(true, 1<<20)
}
