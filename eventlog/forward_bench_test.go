package eventlog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// BenchmarkForward: the forwarder's rate from PI_LOCAL to the hub's PI_HUB,
// over the leaf link, for a backlog written across one session or across
// many at once (its lines interleaved, as a writer of many sessions leaves
// them: each session's part of a window is a few lines). The baselines, in
// the same run over the same link into a stream of the hub's: the same
// lines published one by one, each waiting for its ack (a raw client's
// exactly-once publish), and published without waiting (PublishAsync, the
// acks awaited at the end), and published in atomic batches of
// eventlog.MaxBatch (what the hub takes from one writer).
func BenchmarkForward(b *testing.B) {
	for _, sessions := range []int{1, 200} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) { forwardBench(b, sessions) })
	}
}

func forwardBench(b *testing.B, sessions int) {
	n := testenv.EnvInt(b, "PISYNC_BENCH_FORWARD", 4000, sessions, 1<<30)
	n -= n % sessions
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		hubJS, ws, _ := hubAndLeaf(b)
		nc, local := localOn(b, ws, "w1")
		pad := strings.Repeat("p", 300)
		last := make([]uint64, sessions)
		for i := range n {
			s := i % sessions
			id := fmt.Sprintf("l%06d", i)
			l := eventlog.NewLine(fmt.Appendf(nil, `{"type":"message","id":%q,"pad":%q}`, id, pad), id, "", "message", "f.jsonl", int64(i))
			seq, _, err := local.Publish(ctx, fmt.Sprint("s", s), last[s], []eventlog.Line{l})
			if err != nil {
				b.Fatal(err)
			}
			last[s] = seq
		}
		hub, err := hubJS.Stream(ctx, eventlog.HubStream)
		if err != nil {
			b.Fatal(err)
		}
		raw := rawOverLeaf(b, hubJS, nc, n, pad)
		b.StartTimer()
		t0 := time.Now()
		runWatchingForwarder(b, ws, nc, local)
		testenv.WaitFor(b, 10*time.Minute, func() (bool, string) {
			info, err := hub.Info(ctx)
			if err != nil {
				return false, err.Error()
			}
			return info.State.Msgs == uint64(n), fmt.Sprintf("%d of %d lines on the hub", info.State.Msgs, n)
		})
		rate := float64(n) / time.Since(t0).Seconds()
		b.StopTimer()
		b.ReportMetric(rate, "lines/s")
		b.ReportMetric(raw.sync, "baseline-sync-lines/s")
		b.ReportMetric(raw.async, "baseline-async-lines/s")
		b.ReportMetric(rate/raw.sync, "x-sync")
		b.ReportMetric(rate/raw.async, "x-async")
		b.ReportMetric(raw.batch, "baseline-batch-lines/s")
		b.ReportMetric(rate/raw.batch, "x-batch")
	}
}

type rawRates struct{ sync, async, batch float64 }

// rawOverLeaf publishes n messages of about a line's size from nc, the
// workstation's connection, into a file stream of the hub's, over the leaf
// link: first each waiting for its ack, then as many again without waiting
// (the acks awaited at the end), then as many again in atomic batches of
// eventlog.MaxBatch (ADR-50's headers, set here by hand). It returns the
// three rates, messages a second.
func rawOverLeaf(tb testing.TB, hubJS jetstream.JetStream, nc *nats.Conn, n int, pad string) rawRates {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const name = "BENCH_RAW"
	if _, err := hubJS.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"bench.raw.>"}, Storage: jetstream.FileStorage, AllowAtomicPublish: true}); err != nil {
		tb.Fatal(err)
	}
	defer hubJS.DeleteStream(context.Background(), name)
	js, err := jetstream.NewWithDomain(nc, embedded.HubDomain)
	if err != nil {
		tb.Fatal(err)
	}
	data := fmt.Appendf(nil, `{"type":"message","id":"l000000","pad":%q}`, pad)
	t0 := time.Now()
	for i := range n {
		if _, err := js.Publish(ctx, fmt.Sprint("bench.raw.s", i%200), data); err != nil {
			tb.Fatal(err)
		}
	}
	var r rawRates
	r.sync = float64(n) / time.Since(t0).Seconds()
	t0 = time.Now()
	for i := range n {
		if _, err := js.PublishAsync(fmt.Sprint("bench.raw.s", i%200), data); err != nil {
			tb.Fatal(err)
		}
		if i%2000 == 1999 || i == n-1 { // within what the client lets wait
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				tb.Fatal("the hub did not ack the raw async publishes")
			}
		}
	}
	r.async = float64(n) / time.Since(t0).Seconds()
	t0 = time.Now()
	for i := 0; i < n; i += eventlog.MaxBatch {
		id := fmt.Sprint("raw-", i)
		k := min(eventlog.MaxBatch, n-i)
		for j := range k {
			m := nats.NewMsg(fmt.Sprint("bench.raw.s", (i+j)%200))
			m.Data = data
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", fmt.Sprint(j+1))
			if j < k-1 {
				if err := nc.PublishMsg(m); err != nil {
					tb.Fatal(err)
				}
				continue
			}
			m.Header.Set("Nats-Batch-Commit", "1")
			resp, err := nc.RequestMsgWithContext(ctx, m)
			if err != nil {
				tb.Fatal(err)
			}
			if strings.Contains(string(resp.Data), `"error"`) {
				tb.Fatalf("raw batch: %s", resp.Data)
			}
		}
	}
	r.batch = float64(n) / time.Since(t0).Seconds()
	return r
}
