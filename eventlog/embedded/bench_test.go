package embedded

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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

// BenchmarkRePublish is what the streams' RePublish (each stored message
// published again on pi.live.>, for the local listener's readers) costs a
// write: the same 1 KiB messages published asynchronously, 1,000 in flight,
// to two streams of one server, one republishing and one not, interleaved
// batch by batch so that both see the same load. No reader subscribes, as
// on most machines; a subscribed reader is a third series. On file streams
// of the daemon's SyncAlways store (PI_LOCAL, PI_ALL) the fsync hides the
// rest; memory streams show the work itself, as an upper bound for the
// projection's bucket, which writes without an fsync.
func BenchmarkRePublish(b *testing.B) {
	for _, st := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
		b.Run(st.String(), func(b *testing.B) { benchRePublish(b, st) })
	}
}

func benchRePublish(b *testing.B, storage jetstream.StorageType) {
	cfg := listenConfig(b)
	s := startServer(b, cfg)
	runRelay(b, s)
	js, err := jetstream.New(connect(b, s))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, c := range []jetstream.StreamConfig{
		{Name: "PLAIN", Subjects: []string{"plain.>"}, Storage: storage},
		{Name: "PI_LOCAL", Subjects: []string{"pi.evt.>"}, Storage: storage, AllowDirect: true,
			RePublish: &jetstream.RePublish{Source: "pi.evt.>", Destination: "pi.live.evt.>"}},
	} {
		if _, err := js.CreateStream(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	payload := bytes.Repeat([]byte("x"), 1024)
	const batch = 1000
	burst := func(subj string) time.Duration {
		start := time.Now()
		for range batch {
			if _, err := js.PublishAsync(subj, payload); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			b.Fatal("acks did not come")
		}
		return time.Since(start)
	}
	var plain, republish, read time.Duration
	var reader *nats.Conn
	for i := 0; b.Loop(); i++ {
		plain += burst("plain.s")
		republish += burst("pi.evt.n.s")
		if reader == nil {
			if reader, err = connectReader(b, s); err != nil {
				b.Fatal(err)
			}
			if _, err := reader.Subscribe("pi.evt.>", func(*nats.Msg) {}); err != nil {
				b.Fatal(err)
			}
			reader.Flush()
			continue // the first round had no reader
		}
		read += burst("pi.evt.n.r")
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*batch) / 1e3 }
	b.ReportMetric(per(plain), "plain-µs/msg")
	b.ReportMetric(per(republish), "republish-µs/msg")
	b.ReportMetric(float64(republish)/float64(plain), "republish/plain")
	if b.N > 1 {
		b.ReportMetric(float64(read)/float64(plain)*float64(b.N)/float64(b.N-1), "read/plain")
	}
}
