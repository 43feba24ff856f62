package watch

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// The benchmarks here compare the tailer with what the embedded server alone
// does on the same machine in the same run. An absolute millisecond says
// more about the disk than about the tailer; the ratio to a raw publish
// does not. Nothing here asserts a time: the figures are reported as
// metrics and read against the goals in docs/PERFORMANCE.md.
//
// Each b.N iteration runs one fixed workload on fresh temp dirs and a fresh
// embedded server (SyncAlways, as the daemon runs it); the metrics pool the
// samples of all iterations. A workload takes seconds, so run them with
// -benchtime=1x (or Nx for more samples); ns/op is the wall time of a whole
// workload, set-up included, and means little.

// benchWait bounds every wait. A healthy run never comes near it; it turns
// a lost event into a failure instead of a hang.
const benchWait = 30 * time.Second

// piLine is a pi-like message entry of exactly size bytes (without '\n').
func piLine(id, parent string, size int) string {
	base := entry(id, parent, "")
	pad := size - len(base)
	if pad < 0 {
		pad = 0
	}
	text := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", pad/57+1)[:pad]
	return entry(id, parent, text)
}

// ---------------------------------------------------------------------------
// Append → durable event latency.

const (
	appendSamples = 1000 // measured appends per workload
	appendWarmup  = 20   // appends before measuring (session load, first allocations)
	appendSize    = 1024 // bytes per line, a typical short pi message entry
)

type latencies struct {
	stored   []time.Duration // write(2) → stored line received by an ordered consumer
	seen     []time.Duration // write(2) → the tailer's publish seen by a core subscription
	baseAck  []time.Duration // raw js.PublishMsg → its PubAck
	baseRecv []time.Duration // raw js.PublishMsg → received by the ordered consumer
	// baseFile is the raw publish right after appending the line to a file
	// nobody watches, on the same file system. The tailer's publish always
	// follows a fresh file write; if the stream's fsync had to write that
	// data out too (ext4's ordered journal), this series would be slower
	// than baseAck and the difference would not be the tailer's.
	baseFile []time.Duration
}

// BenchmarkAppendToEvent measures how long a line appended to a session file
// takes to become a stored event in PI_LOCAL, against a raw synchronous
// JetStream publish of the same bytes to the same server, interleaved one
// for one so that both see the same disk and the same load.
func BenchmarkAppendToEvent(b *testing.B) {
	var l latencies
	for b.Loop() {
		appendWorkload(b, &l)
	}
	p50, p99 := quantile(l.stored, 0.50), quantile(l.stored, 0.99)
	bp50, bp99 := quantile(l.baseAck, 0.50), quantile(l.baseAck, 0.99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(mean(l.stored)), "mean-ms")
	b.ReportMetric(ms(bp50), "base-p50-ms")
	b.ReportMetric(ms(bp99), "base-p99-ms")
	b.ReportMetric(float64(p50)/float64(bp50), "p50/base-p50")
	b.ReportMetric(float64(p99)/float64(bp99), "p99/base-p99")
	b.ReportMetric(ms(quantile(l.baseFile, 0.50)), "base-fs-p50-ms")
	b.ReportMetric(ms(quantile(l.baseFile, 0.99)), "base-fs-p99-ms")
	b.Logf("%d samples per series", len(l.stored))
	store := make([]time.Duration, len(l.stored))
	for i := range store {
		store[i] = l.stored[i] - l.seen[i]
	}
	for _, s := range []struct {
		name string
		d    []time.Duration
	}{
		{"append→stored (tailer)", l.stored},
		{"append→publish seen (tailer, before store)", l.seen},
		{"publish seen→stored (tailer's line)", store},
		{"raw publish→ack (baseline)", l.baseAck},
		{"raw publish→stored (baseline, same consumer)", l.baseRecv},
		{"raw publish→ack after an unwatched append", l.baseFile},
	} {
		b.Logf("%-46s p50 %.3f  p90 %.3f  p99 %.3f  max %.3f  mean %.3f ms", s.name,
			ms(quantile(s.d, .5)), ms(quantile(s.d, .9)), ms(quantile(s.d, .99)), ms(quantile(s.d, 1)), ms(mean(s.d)))
	}
}

// arrival is a message the benchmark saw, stamped when its callback ran.
type arrival struct {
	kind string // "seen", "stored" or "base"
	id   string // Pi-Id of a tailer message
	at   time.Time
}

func appendWorkload(b *testing.B, out *latencies) {
	root := b.TempDir()
	n := startNode(b, root, b.TempDir())
	defer n.stop()
	nc, err := n.srv.Connect()
	if err != nil {
		b.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	sid := "bench-append"
	subj, baseSubj := n.log.Subject(sid), n.log.Subject("bench-baseline")
	arrivals := make(chan arrival, 64)
	done := make(chan struct{})
	defer close(done) // unblocks callbacks that would outlive the workload
	note := func(a arrival) {
		select {
		case arrivals <- a:
		case <-done:
		}
	}
	// A core subscription sees the tailer's publish when the server routes
	// it, before the stream has stored it: the split between the tailer's
	// own time and the store's.
	sub, err := nc.Subscribe(subj, func(m *nats.Msg) {
		note(arrival{kind: "seen", id: m.Header.Get(eventlog.HdrID), at: time.Now()})
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	// An ordered consumer only gets what the stream has stored, and with
	// SyncAlways that is after the fsync.
	cons, err := js.OrderedConsumer(ctx, eventlog.LocalStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subj, baseSubj},
	})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		a := arrival{kind: "stored", id: m.Headers().Get(eventlog.HdrID), at: time.Now()}
		if m.Subject() == baseSubj {
			a.kind = "base"
		}
		note(a)
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()

	// await returns when each wanted kind has arrived for id.
	await := func(id string, kinds ...string) map[string]time.Time {
		got := make(map[string]time.Time, len(kinds))
		timer := time.NewTimer(benchWait)
		defer timer.Stop()
		for len(got) < len(kinds) {
			select {
			case a := <-arrivals:
				if slices.Contains(kinds, a.kind) && a.id == id {
					got[a.kind] = a.at
				}
			case <-timer.C:
				b.Fatalf("line %q: only %v arrived within %v", id, got, benchWait)
			}
		}
		return got
	}

	path := filepath.Join(root, "--home-u-p--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
	writeFile(b, path, header(sid)+"\n")
	other := filepath.Join(b.TempDir(), "unwatched.jsonl")
	writeFile(b, other, header("unwatched")+"\n")
	await(sid, "seen", "stored")

	parent := ""
	for i := range appendWarmup + appendSamples {
		id := fmt.Sprintf("e%05d", i)
		line := piLine(id, parent, appendSize)
		parent = id

		// pi appends with fs.appendFileSync: open with O_APPEND, one
		// write(2), close.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		_, err = f.Write([]byte(line + "\n"))
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		tail := await(id, "seen", "stored")

		m := nats.NewMsg(baseSubj)
		m.Data = []byte(line)
		t1 := time.Now()
		if _, err := js.PublishMsg(ctx, m); err != nil {
			b.Fatalf("baseline publish: %v", err)
		}
		ack := time.Since(t1)
		base := await("", "base")

		f, err = os.OpenFile(other, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		_, err = f.Write([]byte(line + "\n"))
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		m = nats.NewMsg(baseSubj)
		m.Data = []byte(line)
		t2 := time.Now()
		if _, err := js.PublishMsg(ctx, m); err != nil {
			b.Fatalf("baseline publish: %v", err)
		}
		fileAck := time.Since(t2)
		await("", "base")

		if i < appendWarmup {
			continue
		}
		out.stored = append(out.stored, tail["stored"].Sub(t0))
		out.seen = append(out.seen, tail["seen"].Sub(t0))
		out.baseAck = append(out.baseAck, ack)
		out.baseRecv = append(out.baseRecv, base["base"].Sub(t1))
		out.baseFile = append(out.baseFile, fileAck)
	}
}

// ---------------------------------------------------------------------------
// Backfill of existing sessions.

const (
	backfillSessions = 200
	backfillLines    = 50 // a header and 49 entries per session
	backfillSize     = 1024
	// backfillWorkers is the daemon's default parallelism (config WORKERS):
	// the tailer's worker count and the baseline's number of publishers.
	backfillWorkers = 8
)

type benchSession struct {
	sid, rel string
	data     []byte
	lines    []eventlog.Line // what the tailer publishes for data
}

// backfillCorpus builds the sessions: files spread over 10 --cwd-- folders,
// the way pi lays them out.
func backfillCorpus() []benchSession {
	out := make([]benchSession, backfillSessions)
	for i := range out {
		s := &out[i]
		s.sid = fmt.Sprintf("bf-%04d-0000-7000-8000-000000000000", i)
		s.rel = fmt.Sprintf("--home-u-p%d--/2026-11-29T23-08-16-463Z_%s.jsonl", i%10, s.sid)
		var sb strings.Builder
		add := func(raw, id, parent, typ string) {
			sb.WriteString(raw)
			sb.WriteByte('\n')
			s.lines = append(s.lines, eventlog.NewLine([]byte(raw), id, parent, typ, s.rel, int64(sb.Len())))
		}
		add(header(s.sid), s.sid, "", "session")
		parent := ""
		for j := 1; j < backfillLines; j++ {
			id := fmt.Sprintf("%08x", i*backfillLines+j)
			add(piLine(id, parent, backfillSize), id, parent, "message")
			parent = id
		}
		s.data = []byte(sb.String())
	}
	return out
}

// BenchmarkBackfill measures the tailer reading sessions that exist before
// it starts, in lines per second until PI_LOCAL holds them all, against
// publishing the same lines with eventlog.Publisher.Publish (one call per
// session: one ADR-50 atomic batch of 50) from as many goroutines as the
// tailer has workers, on a fresh server.
func BenchmarkBackfill(b *testing.B) {
	corpus := backfillCorpus()
	tail, base, runs := abba(b,
		func() time.Duration { return backfillTailer(b, corpus) },
		func() time.Duration { return backfillBaseline(b, corpus) })
	lines := float64(runs * backfillSessions * backfillLines)
	tailRate, baseRate := lines/tail.Seconds(), lines/base.Seconds()
	b.ReportMetric(tailRate, "lines/s")
	b.ReportMetric(baseRate, "base-lines/s")
	b.ReportMetric(tailRate/baseRate, "rate/base-rate")
	b.Logf("%d sessions × %d lines of ~%d B, %d workers, %d runs each: tailer %.0f lines/s, baseline %.0f lines/s",
		backfillSessions, backfillLines, backfillSize, backfillWorkers, runs, tailRate, baseRate)
}

// abba runs the tailer and the baseline as tailer, baseline, baseline,
// tailer per b.Loop iteration, so that a disk or a neighbour that slows
// down during the workload weighs on both sides alike, and returns each
// side's total time and how many runs each made.
func abba(b *testing.B, tailer, baseline func() time.Duration) (tail, base time.Duration, runs int) {
	for b.Loop() {
		t1 := tailer()
		b1 := baseline()
		b2 := baseline()
		t2 := tailer()
		b.Logf("tailer %v, %v; baseline %v, %v", t1.Round(time.Millisecond), t2.Round(time.Millisecond),
			b1.Round(time.Millisecond), b2.Round(time.Millisecond))
		tail += t1 + t2
		base += b1 + b2
		runs += 2
	}
	return tail, base, runs
}

// runDir is a fresh folder for one run's files, and remove, which the run
// calls as it ends: every run of a benchmark then writes to a disk in the
// same state. Kept until the
// benchmark's end (b.TempDir), each run's files made the later runs slower
// on this VM: the images session's first three runs stored at about 0.7 s
// a run, and every run from the fourth on at 1.2-1.3 s, whichever side ran
// it, so ABBA's fourth run, a tailer's, bore it alone (2026-12-05,
// docs/PERFORMANCE.md).
func runDir(b *testing.B) (dir string, remove func()) {
	b.Helper()
	dir, err := os.MkdirTemp(b.TempDir(), "run")
	if err != nil {
		b.Fatal(err)
	}
	return dir, func() {
		if err := os.RemoveAll(dir); err != nil {
			b.Errorf("remove a run's files: %v", err)
		}
	}
}

// runLog is benchLog over a folder of the run's own (runDir), and
// closeRun, which the run defers: it closes the server, then removes the
// folder.
func runLog(b *testing.B) (lg *eventlog.Local, closeRun func()) {
	state, remove := runDir(b)
	srv, lg := benchLog(b, state)
	return lg, func() {
		srv.Close()
		remove()
	}
}

// benchLog starts a fresh embedded server with PI_LOCAL, as the daemon does.
func benchLog(b *testing.B, state string) (*embedded.Server, *eventlog.Local) {
	b.Helper()
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Config{StateDir: state, NodeID: "test-node", StoreCipher: benchCipher})
	if err != nil {
		b.Fatalf("embedded: %v", err)
	}
	nc, err := srv.Connect()
	if err != nil {
		srv.Close()
		b.Fatalf("connect: %v", err)
	}
	lg, err := eventlog.OpenLocal(ctx, nc, "test-node")
	if err != nil {
		srv.Close()
		b.Fatalf("open log: %v", err)
	}
	return srv, lg
}

// checkStored fails unless PI_LOCAL holds exactly the corpus: each line's
// messages, one subject a session.
func checkStored(b *testing.B, lg *eventlog.Local, corpus []benchSession) {
	b.Helper()
	info, err := lg.Info(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	want := 0
	for i := range corpus {
		for j := range corpus[i].lines {
			want += corpus[i].lines[j].Chunks()
		}
	}
	if info.Messages != uint64(want) || info.Subjects != uint64(len(corpus)) {
		b.Fatalf("PI_LOCAL holds %d messages on %d subjects, want %d on %d",
			info.Messages, info.Subjects, want, len(corpus))
	}
}

// backfillTailer times the tailer from Run until every line is published
// (the counter moves only after the PubAck, so the lines are durable).
func backfillTailer(b *testing.B, corpus []benchSession) time.Duration {
	return tailerRun(b, corpus, benchWait, nil)
}

// tailerRun times a tailer over a fresh root holding corpus, from Run until
// every line is published, waiting at most wait.
//
// timed, when not nil, is called as the timed part starts, and what it
// returns as it ends (a CPU profile of that part alone: the corpus's file
// written before it is a copy as large as the session).
func tailerRun(b *testing.B, corpus []benchSession, wait time.Duration, timed func() (end func())) time.Duration {
	root, removeRoot := runDir(b)
	defer removeRoot()
	for i := range corpus {
		// Its bytes as they are: through a string they were two copies
		// of the corpus, garbage the timed part's collections then met.
		testenv.WriteFile(b, filepath.Join(root, corpus[i].rel), corpus[i].data)
	}
	lg, closeRun := runLog(b)
	defer closeRun()
	tl := New(lg, Options{Root: root, Workers: backfillWorkers, RescanInterval: 10 * time.Second, MaxLine: 64 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)

	// The corpus just written would be written back while the tailer
	// stores: the baseline writes no file. (Not quiesce: a heap given
	// back makes both sides fault every buffer in again, 25-30% slower.)
	syscall.Sync()
	end := func() {}
	if timed != nil {
		end = timed()
	}
	start := time.Now()
	go func() { done <- tl.Run(ctx) }()
	want := int64(0)
	for i := range corpus {
		want += int64(len(corpus[i].lines))
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for tl.Stats().LinesPublished < want {
		select {
		case <-tick.C:
		case err := <-done:
			b.Fatalf("tailer stopped: %v", err)
		case <-deadline.C:
			b.Fatalf("tailer published %+v within %v, want %d lines", tl.Stats(), wait, want)
		}
	}
	elapsed := time.Since(start)
	end()

	cancel()
	if err := <-done; err != nil {
		b.Fatalf("tailer: %v", err)
	}
	if st := tl.Stats(); st.LinesPublished != want || st.PublishErrors != 0 {
		b.Fatalf("tailer stats %+v", st)
	}
	checkStored(b, lg, corpus)
	return elapsed
}

// backfillBaseline times raw eventlog publishing of the same lines from
// backfillWorkers goroutines sharing one queue of sessions (a perfectly
// balanced split; the tailer assigns files to workers by path hash).
func backfillBaseline(b *testing.B, corpus []benchSession) time.Duration {
	lg, closeRun := runLog(b)
	defer closeRun()
	syscall.Sync()
	ctx, cancel := context.WithTimeout(context.Background(), benchWait)
	defer cancel()
	work := make(chan *benchSession)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)

	start := time.Now()
	for range backfillWorkers {
		wg.Go(func() {
			for s := range work {
				_, n, err := lg.Publish(ctx, s.sid, 0, s.lines)
				if err == nil && n != len(s.lines) {
					err = fmt.Errorf("stored %d of %d lines", n, len(s.lines))
				}
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("session %s: %w", s.sid, err))
					mu.Unlock()
				}
			}
		})
	}
	for i := range corpus {
		work <- &corpus[i]
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)

	if firstErr != nil {
		b.Fatalf("baseline publish: %v", firstErr)
	}
	checkStored(b, lg, corpus)
	return elapsed
}

// ---------------------------------------------------------------------------

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func mean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
