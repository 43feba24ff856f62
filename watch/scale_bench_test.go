package watch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// BenchmarkScale measures the tailer's first read (the sessions exist
// before it starts) along one dimension at a time, against a raw atomic
// batch publish of the same lines in the same run (no tailer: the lines
// built in memory and published with eventlog.Local.PublishGroups, whole
// sessions packed into batches of up to eventlog.MaxBatch messages, or
// Publish for a session larger than a batch, from as many goroutines as
// the tailer has workers). Runs are ABBA: tailer, raw, raw, tailer.
//
//	go test -run '^$' -bench 'Scale/sessions=1000$' -benchtime=1x ./watch/
//	PISYNC_BENCH_LARGE=1 go test -run '^$' -bench 'Scale/sessions=10000$' -benchtime=1x -timeout 30m ./watch/
//
// Sub-benchmarks: sessions=N (N sessions of 6 lines of ~300 B: a header
// and five entries), lines=N (one session of N lines of 1 KiB),
// size=N (200 sessions of 6 lines of N bytes), session=200MB (one
// session of 2 KiB lines, 200 MB; large). Reported: lines/s,
// raw-lines/s, rate/raw-rate, and, measured while the tailer still
// follows every file after its first read, after a GC and
// debug.FreeOSMemory: rss-after-MB (the whole process, the embedded
// server included) and heap-after-MB. PISYNC_BENCH_HEAPPROFILE=FILE
// writes a heap profile at that point.
func BenchmarkScale(b *testing.B) {
	large := os.Getenv("PISYNC_BENCH_LARGE") != ""
	cases := []struct {
		name                  string
		sessions, lines, size int
		large                 bool
	}{
		{"sessions=100", 100, 6, 300, false},
		{"sessions=1000", 1000, 6, 300, false},
		{"sessions=10000", 10000, 6, 300, true},
		{"lines=1000", 1, 1000, 1024, false},
		{"lines=10000", 1, 10000, 1024, false},
		{"size=1KiB", 200, 6, 1 << 10, false},
		{"size=64KiB", 200, 6, 64 << 10, false},
		{"size=1MiB", 50, 6, 1 << 20, true},
		{"session=200MB", 1, 100_000, 2 << 10, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if c.large && !large {
				b.Skip("set PISYNC_BENCH_LARGE=1")
			}
			sc := scaleCorpus{sessions: c.sessions, lines: c.lines, size: c.size}
			var tail, raw time.Duration
			var rss, heap float64
			runs := 0
			for b.Loop() {
				t1, r1, h1 := scaleTailer(b, sc)
				b1 := scaleRaw(b, sc)
				b2 := scaleRaw(b, sc)
				t2, r2, h2 := scaleTailer(b, sc)
				b.Logf("tailer %v, %v; raw %v, %v; rss after %.0f, %.0f MB", t1.Round(time.Millisecond), t2.Round(time.Millisecond),
					b1.Round(time.Millisecond), b2.Round(time.Millisecond), r1, r2)
				tail += t1 + t2
				raw += b1 + b2
				rss, heap = max(rss, r1, r2), max(heap, h1, h2)
				runs += 2
			}
			n := float64(runs * sc.sessions * sc.lines)
			rate, rawRate := n/tail.Seconds(), n/raw.Seconds()
			b.ReportMetric(rate, "lines/s")
			b.ReportMetric(rawRate, "raw-lines/s")
			b.ReportMetric(rate/rawRate, "rate/raw-rate")
			b.ReportMetric(rss, "rss-after-MB")
			b.ReportMetric(heap, "heap-after-MB")
		})
	}
}

// scaleCorpus makes its sessions on demand, so that no copy of a large
// corpus sits in the benchmark's own memory while it measures.
type scaleCorpus struct{ sessions, lines, size int }

func (c scaleCorpus) sid(i int) string { return fmt.Sprintf("sc-%08d-0000-7000-8000-000000000000", i) }

func (c scaleCorpus) rel(i int) string {
	return fmt.Sprintf("--home-u-p%d--/2026-11-29T23-08-16-463Z_%s.jsonl", i%50, c.sid(i))
}

// session writes session i's lines to w and returns them as eventlog lines
// over the bytes written (when lines is true).
func (c scaleCorpus) session(i int, withLines bool) ([]byte, []eventlog.Line) {
	var buf bytes.Buffer
	var out []eventlog.Line
	rel := c.rel(i)
	add := func(raw, id, parent, typ string) {
		start := buf.Len()
		buf.WriteString(raw)
		buf.WriteByte('\n')
		if withLines {
			out = append(out, eventlog.Line{Raw: buf.Bytes()[start : buf.Len()-1], ID: id, ParentID: parent, Type: typ, File: rel, Off: int64(buf.Len())})
		}
	}
	buf.Grow(c.lines * (c.size + 1))
	add(header(c.sid(i)), c.sid(i), "", "session")
	parent := ""
	for j := 1; j < c.lines; j++ {
		id := fmt.Sprintf("%08x", i*c.lines+j)
		add(piLine(id, parent, c.size), id, parent, "message")
		parent = id
	}
	// The buffer may have moved while it grew: point the lines at its
	// final bytes, then hash them.
	data := buf.Bytes()
	end := 0
	for k := range out {
		n := len(out[k].Raw)
		out[k] = eventlog.NewLine(data[end:end+n], out[k].ID, out[k].ParentID, out[k].Type, rel, int64(end+n+1))
		end += n + 1
	}
	return data, out
}

func (c scaleCorpus) check(b *testing.B, lg *eventlog.Local) {
	b.Helper()
	info, err := lg.Info(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if info.Messages < uint64(c.sessions*c.lines) || info.Subjects != uint64(c.sessions) {
		b.Fatalf("PI_LOCAL holds %d messages on %d subjects, want %d lines on %d", info.Messages, info.Subjects, c.sessions*c.lines, c.sessions)
	}
}

// quiesce starts a measurement on a quiet disk and heap: the files just
// written (10,000 new files are tens of MB of data and journal) would
// otherwise be written back during whichever side runs next.
func quiesce() {
	syscall.Sync()
	debug.FreeOSMemory()
}

// scaleWait bounds a whole first read: the slowest case takes minutes.
const scaleWait = 20 * time.Minute

// scaleTailer times the tailer from Run until every line is published, and
// measures the process's memory while it goes on following the files.
func scaleTailer(b *testing.B, c scaleCorpus) (took time.Duration, rssMB, heapMB float64) {
	b.StopTimer()
	root := b.TempDir()
	for i := range c.sessions {
		data, _ := c.session(i, false)
		path := filepath.Join(root, c.rel(i))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	srv, lg := benchLog(b, b.TempDir())
	defer srv.Close()
	quiesce()
	b.StartTimer()
	tl := New(lg, Options{Root: root, Workers: backfillWorkers, RescanInterval: 10 * time.Second, MaxLine: 64 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- tl.Run(ctx) }()
	want := int64(c.sessions * c.lines)
	deadline := time.NewTimer(scaleWait)
	defer deadline.Stop()
	select {
	case <-tl.Ready():
	case err := <-done:
		b.Fatalf("tailer stopped: %v", err)
	case <-deadline.C:
		b.Fatalf("tailer not ready within %v: %+v", scaleWait, tl.Stats())
	}
	took = time.Since(start)
	b.StopTimer()
	if st := tl.Stats(); st.LinesPublished != want || st.PublishErrors != 0 {
		b.Fatalf("tailer stats %+v, want %d lines", st, want)
	}
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rssMB, heapMB = float64(testenv.ProcStatus("VmRSS"))/1e6, float64(ms.HeapInuse)/1e6
	if p := os.Getenv("PISYNC_BENCH_HEAPPROFILE"); p != "" {
		// What the process holds per followed session (the embedded
		// server's share included: it runs in this process).
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		pprof.WriteHeapProfile(f)
		f.Close()
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("tailer: %v", err)
	}
	c.check(b, lg)
	b.StartTimer()
	return took, rssMB, heapMB
}

// scaleRaw times the raw publish of the same lines: whole sessions packed
// into atomic batches of up to MaxBatch messages, backfillWorkers
// publishers sharing one queue.
func scaleRaw(b *testing.B, c scaleCorpus) time.Duration {
	b.StopTimer()
	srv, lg := benchLog(b, b.TempDir())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), scaleWait)
	defer cancel()
	// Build the batches first, outside the clock. A session larger than
	// a batch is published alone with Publish (batches of MaxBatch).
	big := c.lines > eventlog.MaxBatch
	var batches [][]eventlog.Group
	var alone [][]eventlog.Line
	if big {
		for i := range c.sessions {
			_, lines := c.session(i, true)
			alone = append(alone, lines)
		}
	} else {
		var cur []eventlog.Group
		n := 0
		for i := range c.sessions {
			_, lines := c.session(i, true)
			if n+len(lines) > eventlog.MaxBatch {
				batches, cur, n = append(batches, cur), nil, 0
			}
			cur = append(cur, eventlog.Group{SID: c.sid(i), Lines: lines})
			n += len(lines)
		}
		batches = append(batches, cur)
	}
	quiesce()
	work := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	b.StartTimer()
	start := time.Now()
	for range backfillWorkers {
		wg.Go(func() {
			for i := range work {
				if big {
					lines := alone[i]
					if _, n, err := lg.Publish(ctx, c.sid(i), 0, lines); err != nil || n != len(lines) {
						fail(fmt.Errorf("session %d: stored %d of %d: %v", i, n, len(lines), err))
					}
					continue
				}
				if _, err := lg.PublishGroups(ctx, batches[i]); err != nil {
					fail(err)
				}
			}
		})
	}
	jobs := c.sessions
	if !big {
		jobs = len(batches)
	}
	for i := range jobs {
		work <- i
	}
	close(work)
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatalf("raw publish: %v", firstErr)
	}
	c.check(b, lg)
	b.StartTimer()
	return took
}
