package projection

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/session"
)

// BenchmarkContextMemory measures the resident set of the whole node (the
// embedded nats-server, the tailer and the projection worker, all in this
// process, with their own defaults: the tailer's 128 MiB of lines, the
// worker's 64 MiB of bodies and 16 MiB of read-ahead; PISYNC_MEMORY_BUDGET,
// the daemon's, does not apply) as a big session is read by the tailer and
// projected, then as its context is queried (docs/PERFORMANCE.md, Memory):
//
//   - lines: 200 MB, 100 000 entries of 2 KB;
//   - images: 200 MB of entries with a 1–4 MB base64 image each, as pi
//     writes screenshots;
//   - images1GB: the same, 1 GB.
//
// Run one per process, so that the peak is the workload's:
//
//	go test -run '^$' -bench 'ContextMemory/lines$' -benchtime=1x -timeout 60m ./projection/
//
// Reported: ingest-peak-rss-MB (VmHWM from the start of the node until
// every line is projected), query-base-rss-MB (RSS before a query),
// query-peak-rss-MB and query-peak-heap-MB (VmHWM reset before the
// query; HeapInuse sampled every 10 ms), query-rss-after-MB (RSS after the
// query, a GC and debug.FreeOSMemory), the same for a cold query (the tree
// dropped first, so it is rebuilt from the stream), readahead-MB (the most
// body bytes a query held) and context-MB (bytes written). The benchmark
// fails when a query raises the peak more than queryAllowance above the
// resident set it started from, or when the streamed context differs from
// the file's.
func BenchmarkContextMemory(b *testing.B) {
	img := func(i int) int { return (1 + i%4) << 20 }
	b.Run("lines", func(b *testing.B) { contextMemory(b, 100_000, 2<<10, nil) })
	b.Run("images", func(b *testing.B) { contextMemory(b, 80, 0, img) })
	b.Run("images1GB", func(b *testing.B) { contextMemory(b, 400, 0, img) })
}

// queryAllowance is what a context query may add to the resident set:
// three times 128 MiB (the tailer's default budget, once
// PISYNC_MEMORY_BUDGET's default). The query itself holds the read-ahead
// (16 MiB) and, when the window fits, the bodies kept for the next query
// (64 MiB); the rest is the embedded server's cache of the blocks it read
// (dropped lazily), the consumers' buffers and every body's copies on its
// way from the store, which the Go heap lets grow to about twice the live
// heap before it collects: the same factor as the tailer's
// (docs/PERFORMANCE.md, Memory).
const queryAllowance = 3 * 128 << 20

func contextMemory(b *testing.B, entries, size int, image func(int) int) {
	const mb = 1e6
	var rss rssMeter
	for b.Loop() {
		b.StopTimer()
		root := b.TempDir()
		sid := "0199ffff-0000-7000-8000-000000000001"
		path := filepath.Join(root, "--mem--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl")
		writeFile(b, path, nil)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		writeSession(bw, sid, entries, size, 0, 0, image)
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		st, _ := os.Stat(path)
		want, wantLen := fileContextSum(b, path)
		settle()

		rss.reset()
		b.StartTimer()
		n := startNode(b, root, b.TempDir())
		waitFor(b, 30*time.Minute, func() (bool, string) {
			var cv ContextView
			n.kvGet(sessionKey(sid, "ctx"), &cv)
			return cv.Entries == entries, fmt.Sprintf("%d of %d entries projected", cv.Entries, entries)
		})
		b.StopTimer()
		b.ReportMetric(float64(st.Size())/mb, "file-MB")
		b.ReportMetric(float64(rss.field("VmHWM"))/mb, "ingest-peak-rss-MB")

		for _, cold := range []bool{false, true} {
			name := "query"
			if cold {
				name = "cold"
				s := n.worker.lookup(sid, false)
				s.mu.Lock()
				s.tree = nil
				n.worker.mu.Lock()
				n.worker.trees--
				n.worker.mu.Unlock()
				s.mu.Unlock()
			}
			base := waitSettled(b)
			rss.reset()
			heap := sampleHeap()
			out := &hashResponse{hashWriter: newHashWriter(), header: http.Header{}, status: http.StatusOK}
			req := httptest.NewRequest("GET", "/context?session="+sid, nil)
			b.StartTimer()
			n.worker.Handler().ServeHTTP(out, req) // as the daemon answers `pisyncd context SESSION`
			b.StopTimer()
			peakHeap := heap.stop()
			peak := rss.field("VmHWM")
			if out.status != http.StatusOK {
				b.Fatalf("%s: status %d", name, out.status)
			}
			if got := out.sum(); got != want || out.n != wantLen {
				b.Fatalf("%s: streamed %d bytes (sha256 %s), the file's context is %d bytes (%s)", name, out.n, got, wantLen, want)
			}
			settle()
			b.ReportMetric(float64(base)/mb, name+"-base-rss-MB")
			b.ReportMetric(float64(peak)/mb, name+"-peak-rss-MB")
			b.ReportMetric(float64(peakHeap)/mb, name+"-peak-heap-MB")
			b.ReportMetric(float64(rss.field("VmRSS"))/mb, name+"-rss-after-MB")
			if peak > base+queryAllowance {
				b.Errorf("%s: peak RSS %d MB, more than %d MB above the %d MB it started from", name, peak>>20, queryAllowance>>20, base>>20)
			}
		}
		b.ReportMetric(float64(n.worker.Stats().ReadAheadPeak)/mb, "readahead-MB")
		b.ReportMetric(float64(wantLen)/mb, "context-MB")
		n.stop()
		b.StartTimer()
	}
}

// fileContextSum is the sha256 and length of json.Marshal of the file's
// context and its '\n', built in memory (before anything is measured).
func fileContextSum(t testing.TB, path string) (string, int64) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := session.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Context()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	h := newHashWriter()
	h.Write(append(raw, '\n')) // as /context ends it
	return h.sum(), h.n
}

// hashResponse is an http.ResponseWriter that hashes the body.
type hashResponse struct {
	*hashWriter
	header http.Header
	status int
}

func (r *hashResponse) Header() http.Header { return r.header }

func (r *hashResponse) WriteHeader(code int) { r.status = code }

// waitSettled waits until the collected resident set has stopped falling
// for 12 s and returns it: the embedded server keeps the blocks it wrote or
// read cached until 10 s after their last use, so a query right after the
// ingest would start from (and, the Go heap growing to twice its live
// size, peak in proportion to) what the ingest left behind.
func waitSettled(t testing.TB) int64 {
	var rss rssMeter
	var last int64 = -1
	var at, since time.Time
	waitFor(t, 3*time.Minute, func() (bool, string) {
		if time.Since(at) < time.Second {
			return false, "settling"
		}
		settle()
		r := rss.field("VmRSS")
		at = time.Now()
		if last < 0 || r < last-1<<20 {
			since = at
		}
		last = r
		return at.Sub(since) >= 12*time.Second, fmt.Sprintf("resident set %d MB, still falling", r>>20)
	})
	return last
}

// settle collects and returns the freed pages to the system at once, as
// the runtime would lazily over the next minutes.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

type heapSampler struct {
	peak     atomic.Uint64
	profiled bool
	done     chan struct{}
	wg       sync.WaitGroup
}

func sampleHeap() *heapSampler {
	h := &heapSampler{done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			h.peak.Store(max(h.peak.Load(), ms.HeapInuse))
			if p := os.Getenv("PROF"); p != "" && ms.HeapInuse > 150<<20 && !h.profiled {
				h.profiled = true
				f, _ := os.Create(p)
				pprof.WriteHeapProfile(f)
				f.Close()
			}
			select {
			case <-h.done:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) stop() uint64 {
	close(h.done)
	h.wg.Wait()
	return h.peak.Load()
}
