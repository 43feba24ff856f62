package embedded

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkPublishSyncAlways is the baseline for one durable local event:
// a synchronous JetStream publish of a 1 KiB line to a file stream on a
// SyncAlways server over an in-process connection (nats-design.md §8.2
// measured ~0.45 ms p50 on its machine).
func BenchmarkPublishSyncAlways(b *testing.B) {
	s := startServer(b, testConfig(b, b.TempDir()))
	js, err := jetstream.New(connect(b, s))
	if err != nil {
		b.Fatal(err)
	}
	createStream(b, js, "BENCH")
	payload := bytes.Repeat([]byte("x"), 1024)
	ctx := testCtx(b)
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := js.Publish(ctx, "BENCH.s", payload); err != nil {
			b.Fatal(err)
		}
	}
}
