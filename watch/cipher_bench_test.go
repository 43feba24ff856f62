package watch

import (
	"runtime"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// benchCipher is the store cipher the nodes and logs of the benchmarks
// start with (PISYNC_STORE_CIPHER): "" but while BenchmarkStoreCipher
// runs a workload encrypted.
var benchCipher string

// withCipher runs f with the store encrypted at rest by cipher.
func withCipher(cipher string, f func()) {
	benchCipher = cipher
	defer func() { benchCipher = "" }()
	f()
}

// BenchmarkStoreCipher is BenchmarkAppendToEvent and BenchmarkBackfill
// with the store encrypted at rest (chachapoly, the default cipher of
// nats-server) against the same workloads in clear, in the same run and
// interleaved plain, encrypted, encrypted, plain, so that the disk and
// the neighbours weigh on both alike. Each side's raw-publish baseline
// runs on its own store, encrypted or not: "base" ratios say what the
// cipher costs the server alone.
//
//	go test -run '^$' -bench BenchmarkStoreCipher -benchtime=1x ./watch/
func BenchmarkStoreCipher(b *testing.B) {
	const cipher = embedded.StoreCipherChaChaPoly
	corpus := backfillCorpus()
	var plain, enc latencies
	var plainTail, encTail, plainBase, encBase time.Duration
	// Bytes allocated in the process (tailer and server alike) by each
	// side's workloads: the cipher's own buffers are the server's.
	var plainAlloc, encAlloc uint64
	var ms0, ms1 runtime.MemStats
	for b.Loop() {
		for _, on := range []bool{false, true, true, false} {
			c, l, tail, base, alloc := "", &plain, &plainTail, &plainBase, &plainAlloc
			if on {
				c, l, tail, base, alloc = cipher, &enc, &encTail, &encBase, &encAlloc
			}
			runtime.ReadMemStats(&ms0)
			withCipher(c, func() {
				appendWorkload(b, l)
				*tail += backfillTailer(b, corpus)
				*base += backfillBaseline(b, corpus)
			})
			runtime.ReadMemStats(&ms1)
			*alloc += ms1.TotalAlloc - ms0.TotalAlloc
		}
	}
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	p50, p99 := quantile(enc.stored, .5), quantile(enc.stored, .99)
	pp50, pp99 := quantile(plain.stored, .5), quantile(plain.stored, .99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(pp50), "plain-p50-ms")
	b.ReportMetric(ms(pp99), "plain-p99-ms")
	b.ReportMetric(ratio(p50, pp50), "p50/plain-p50")
	b.ReportMetric(ratio(p99, pp99), "p99/plain-p99")
	b.ReportMetric(ratio(quantile(enc.baseAck, .5), quantile(plain.baseAck, .5)), "base-p50/plain-base-p50")
	// Rates: the same lines each side, so a rate ratio is a time ratio
	// turned over.
	b.ReportMetric(ratio(plainTail, encTail), "backfill-rate/plain-rate")
	b.ReportMetric(ratio(plainBase, encBase), "base-rate/plain-base-rate")
	b.ReportMetric(float64(encAlloc)/float64(plainAlloc), "alloc/plain-alloc")
	lines := float64(2 * b.N * backfillSessions * backfillLines)
	b.Logf("append→stored p50/p99: encrypted %.3f/%.3f ms, plain %.3f/%.3f ms; raw publish→ack p50: encrypted %.3f, plain %.3f ms (%d samples a side)",
		ms(p50), ms(p99), ms(pp50), ms(pp99), ms(quantile(enc.baseAck, .5)), ms(quantile(plain.baseAck, .5)), len(enc.stored))
	b.Logf("backfill: tailer encrypted %.0f lines/s, plain %.0f; raw publish encrypted %.0f, plain %.0f; allocated encrypted %d MiB, plain %d MiB",
		lines/encTail.Seconds(), lines/plainTail.Seconds(), lines/encBase.Seconds(), lines/plainBase.Seconds(), encAlloc>>20, plainAlloc>>20)
}
