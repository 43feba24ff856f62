package projection

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestOlderBucketGetsRePublish: a bucket made by an older release, without
// the RePublish the local listener's readers follow it by, gets it when it
// is opened; its other settings stay as they are (a limit set by hand).
func TestOlderBucketGetsRePublish(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := embedded.Start(ctx, embedded.Config{StateDir: t.TempDir(), NodeID: testNode})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	old := bucketConfig()
	old.RePublish, old.MaxBytes = nil, 1<<20
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := openBucket(ctx, js); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "KV_"+Bucket)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.RePublish == nil || cfg.RePublish.Destination != "pi.live.kv.>" || cfg.MaxBytes != 1<<20 || cfg.PersistMode != jetstream.AsyncPersistMode {
		t.Errorf("bucket after open: republish %+v, max bytes %d, persist %v", cfg.RePublish, cfg.MaxBytes, cfg.PersistMode)
	}
}
