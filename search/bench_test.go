package search

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

var benchBytes = flag.Int64("search.bytes", 1<<30, "bytes of session files BenchmarkSearch generates")
var benchDir = flag.String("search.dir", "", "keep the corpus and the index here, and reuse them when a former run left them (queries only)")
var benchBatch = flag.Int("search.batch", 1<<20, "bytes of text a batch holds (Options.BatchBytes)")
var benchNoQueries = flag.Bool("search.noqueries", false, "build the index, and time no queries")
var benchHeap = flag.String("search.heapprofile", "", "write the heap profile at the build's peak (of the heap after a collection) here")
var benchCorpusOnly = flag.Bool("search.corpusonly", false, "with -search.dir, write the corpus and stop (for a daemon to read)")
var benchRebuild = flag.Bool("search.rebuild", false, "with -search.dir holding a former run's corpus, build its index again (the corpus is kept)")

// corpus generates pi sessions that look like real ones to an index: words
// drawn from a 30,000-word vocabulary with a Zipf distribution (a few words
// everywhere, most rare), user questions, assistant answers with thinking
// (not indexed) and tool calls, tool results that are long code-like
// output, bash executions, compactions, labels and names.
type corpus struct {
	r     *rand.Rand
	zipf  *rand.Zipf
	vocab []string
}

func newCorpus(seed uint64) *corpus {
	r := rand.New(rand.NewPCG(seed, 7))
	syl := []string{"ka", "lo", "mi", "ne", "ra", "to", "su", "vi", "de", "po", "gra", "tin", "ber", "mon", "sel", "quo", "xan", "fer", "dul", "zep"}
	seen := map[string]bool{}
	var vocab []string
	for len(vocab) < 30000 {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			b.WriteString(syl[r.IntN(len(syl))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	return &corpus{r: r, zipf: rand.NewZipf(r, 1.07, 2, uint64(len(vocab)-1)), vocab: vocab}
}

func (c *corpus) words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			if i%14 == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(c.vocab[c.zipf.Uint64()])
	}
	return b.String()
}

func (c *corpus) code(lines int) string {
	var b strings.Builder
	for range lines {
		fmt.Fprintf(&b, "%s/%s.go:%d: func %s(%s %s) error { return %s }\n",
			c.vocab[c.zipf.Uint64()], c.vocab[c.zipf.Uint64()], c.r.IntN(900), c.vocab[c.zipf.Uint64()],
			c.vocab[c.zipf.Uint64()], c.vocab[c.zipf.Uint64()], c.vocab[c.zipf.Uint64()])
	}
	return b.String()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// session writes one session of about n entries to w; it returns its id.
func (c *corpus) session(w *bufio.Writer, k, n int) string {
	sid := fmt.Sprintf("0199%04x-%04x-7000-8000-%012x", k>>16, k&0xffff, c.r.Uint64()&0xffffffffffff)
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Minute)
	stamp := func() string {
		ts = ts.Add(time.Duration(1+c.r.IntN(30)) * time.Second)
		return ts.Format("2006-01-02T15:04:05.000Z")
	}
	line := func(m map[string]any) { w.WriteString(mustJSON(m)); w.WriteByte('\n') }
	line(map[string]any{"type": "session", "version": 3, "id": sid, "timestamp": stamp(), "cwd": "/home/u/" + c.vocab[c.r.IntN(200)]})
	parent := any(nil)
	id := 0
	entry := func(typ string, fields map[string]any) {
		id++
		eid := fmt.Sprintf("%08x", id)
		fields["type"], fields["id"], fields["parentId"], fields["timestamp"] = typ, eid, parent, stamp()
		line(fields)
		parent = eid
	}
	msg := func(m map[string]any) {
		m["timestamp"] = ts.UnixMilli()
		entry("message", map[string]any{"message": m})
	}
	entry("model_change", map[string]any{"provider": "anthropic", "modelId": "claude-sonnet-4-5"})
	for id < n {
		msg(map[string]any{"role": "user", "content": c.words(10 + c.r.IntN(50))})
		for range 1 + c.r.IntN(4) {
			call := fmt.Sprintf("call_%d", id)
			var tool map[string]any
			switch c.r.IntN(3) {
			case 0:
				tool = map[string]any{"type": "toolCall", "id": call, "name": "bash", "arguments": map[string]any{"command": "grep -rn " + c.vocab[c.zipf.Uint64()] + " ./" + c.vocab[c.r.IntN(300)]}}
			case 1:
				tool = map[string]any{"type": "toolCall", "id": call, "name": "read", "arguments": map[string]any{"path": c.vocab[c.r.IntN(300)] + "/" + c.vocab[c.r.IntN(3000)] + ".go"}}
			default:
				tool = map[string]any{"type": "toolCall", "id": call, "name": "edit", "arguments": map[string]any{"path": c.vocab[c.r.IntN(300)] + ".go", "oldText": c.code(2), "newText": c.code(3)}}
			}
			msg(map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "thinking", "thinking": c.words(50 + c.r.IntN(200))},
				map[string]any{"type": "text", "text": c.words(20 + c.r.IntN(120))},
				tool,
			}, "provider": "anthropic", "model": "claude-sonnet-4-5", "stopReason": "toolUse",
				"usage": map[string]any{"input": 1000 + c.r.IntN(90000), "output": c.r.IntN(4000)}})
			msg(map[string]any{"role": "toolResult", "toolCallId": call, "toolName": tool["name"], "isError": false,
				"content": []any{map[string]any{"type": "text", "text": c.code(5 + c.r.IntN(120))}}})
		}
		msg(map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": c.words(30 + c.r.IntN(200))}},
			"provider": "anthropic", "model": "claude-sonnet-4-5", "stopReason": "stop"})
		switch c.r.IntN(20) {
		case 0:
			msg(map[string]any{"role": "bashExecution", "command": "go test ./" + c.vocab[c.r.IntN(300)], "output": c.code(10 + c.r.IntN(60)), "exitCode": 0})
		case 1:
			entry("label", map[string]any{"targetId": parent, "label": c.words(2)})
		case 2:
			entry("compaction", map[string]any{"summary": c.words(200 + c.r.IntN(400)), "firstKeptEntryId": parent, "tokensBefore": 150000})
		case 3:
			entry("session_info", map[string]any{"name": c.words(3)})
		}
	}
	return sid
}

// writeCorpus writes sessions into dir until they hold size bytes.
func writeCorpus(b *testing.B, dir string, size int64) (files, sids []string) {
	c := newCorpus(1)
	var total int64
	for k := 0; total < size; k++ {
		p := filepath.Join(dir, fmt.Sprintf("s%05d.jsonl", k))
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		sids = append(sids, c.session(w, k, 50+c.r.IntN(1500)))
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		total += st.Size()
		f.Close()
		files = append(files, p)
	}
	return files, sids
}

// forLines calls fn for every line of the files.
func forLines(b *testing.B, files []string, fn func(sid string, line []byte)) int64 {
	var n int64
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		sid := filepath.Base(p)
		for sc.Scan() {
			n += int64(len(sc.Bytes())) + 1
			fn(sid, sc.Bytes())
		}
		f.Close()
	}
	return n
}

// rss is the process's resident set and its peak since resetPeak, in bytes.
func rss() (cur, peak int64) {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmRSS:" {
				cur = kb << 10
			} else {
				peak = kb << 10
			}
		}
	}
	return cur, peak
}

// memPeaks samples /proc/self/smaps_rollup until stop is closed, and
// returns the peaks of the resident set, its anonymous part (the heap,
// stacks) and its file-backed part (mapped files: the index's segments and
// the binary), in bytes. Each is its own peak: they need not fall at the
// same sample.
func memPeaks(stop <-chan struct{}) (done func() (rss, anon, file int64)) {
	var prss, panon, pfile int64
	var peakHeap uint64
	sample := func() {
		b, _ := os.ReadFile("/proc/self/smaps_rollup")
		var r, a int64
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Rss:":
				r = kb << 10
			case "Anonymous:":
				a = kb << 10
			}
		}
		prss, panon, pfile = max(prss, r), max(panon, a), max(pfile, r-a)
		if *benchHeap != "" {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap {
				peakHeap = ms.HeapInuse
				if f, err := os.Create(*benchHeap); err == nil {
					pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
		}
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() (int64, int64, int64) {
		<-ended
		return prss, panon, pfile
	}
}

// resetPeak resets VmHWM (Linux: clear_refs 5).
func resetPeak() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// BenchmarkSearch builds an index of -search.bytes (1 GiB) of generated
// sessions the way the worker does (Extract, batches of Options.BatchBytes
// with the position), against a raw read of the same files and Extract
// alone, then times a mixed query set (16 rounds, the first not timed).
// It reports once; b.N is not used for the build. -search.dir keeps the
// corpus and the index, and a later run on it times the queries only.
//
//	GOMEMLIMIT=352MiB go test ./search/ -run '^$' -bench BenchmarkSearch -benchtime 1x -timeout 60m -args -search.dir=/tmp/sb1g
func BenchmarkSearch(b *testing.B) {
	dir := *benchDir
	if dir == "" {
		dir = b.TempDir()
	}
	if _, err := os.Stat(filepath.Join(dir, "built")); err == nil && *benchRebuild {
		if err := os.RemoveAll(filepath.Join(dir, "search")); err != nil {
			b.Fatal(err)
		}
		files, err := filepath.Glob(filepath.Join(dir, "sessions", "*.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		forLines(b, files, func(string, []byte) {})
		benchBuild(b, dir, files, 0, time.Since(start))
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "built")); err == nil {
		ix, err := Open(filepath.Join(dir, "search"))
		if err != nil || ix.Rebuilt {
			b.Fatalf("reuse %s: %v", dir, err)
		}
		defer ix.Close()
		b.Logf("reusing the index in %s (%d MiB)", dir, ix.DiskBytes()>>20)
		benchQueries(b, ix)
		return
	}
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		b.Fatal(err)
	}
	files, _ := writeCorpus(b, filepath.Join(dir, "sessions"), *benchBytes)
	if *benchCorpusOnly {
		return
	}
	// Raw read: the same files, line by line (warm page cache after the
	// write, as for the build).
	start := time.Now()
	size := forLines(b, files, func(string, []byte) {})
	raw := time.Since(start)
	// Extract alone: the JSON decoding share.
	start = time.Now()
	docs := 0
	forLines(b, files, func(_ string, l []byte) {
		if _, ok := Extract(l); ok {
			docs++
		}
	})
	extract := time.Since(start)
	report(b, "raw read %.1fs (%.0f MB/s); Extract %.1fs (%.0f MB/s, %.2fx raw)",
		raw.Seconds(), float64(size)/(1<<20)/raw.Seconds(), extract.Seconds(), float64(size)/(1<<20)/extract.Seconds(), extract.Seconds()/raw.Seconds())
	benchBuild(b, dir, files, docs, raw)
}

// benchBuild builds the index of files in dir/search the way the worker
// does, reports its speed and memory, and times the queries.
func benchBuild(b *testing.B, dir string, files []string, docs int, raw time.Duration) {
	runtime.GC()
	rssBefore, _ := rss()
	resetPeak()
	stop := make(chan struct{})
	peaks := memPeaks(stop)
	ix, err := Open(filepath.Join(dir, "search"))
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	batchBytes := *benchBatch
	var batch []Doc
	bytes, seq := 0, uint64(0)
	cpu0 := testenv.ProcessCPU(b)
	start := time.Now()
	size := forLines(b, files, func(sid string, l []byte) {
		seq++
		d, ok := Extract(l)
		if !ok {
			return
		}
		d.SessionID, d.Node = sid, "bench"
		batch = append(batch, d)
		bytes += len(d.Text) + 256
		if bytes >= batchBytes || len(batch) >= maxBatchDocs {
			if err := ix.Write(batch, "PI_LOCAL", seq); err != nil {
				b.Fatal(err)
			}
			batch, bytes = batch[:0], 0
		}
	})
	if err := ix.Write(batch, "PI_LOCAL", seq); err != nil {
		b.Fatal(err)
	}
	build := time.Since(start)
	cpu := testenv.ProcessCPU(b) - cpu0
	_, peak := rss()
	close(stop)
	prss, panon, pfile := peaks()
	n, _ := ix.DocCount()
	diskAfterBuild := ix.DiskBytes()
	os.WriteFile(filepath.Join(dir, "built"), nil, 0o600)
	mb := float64(size) / (1 << 20)
	b.ReportMetric(mb/build.Seconds(), "build-MB/s")
	report(b, "corpus: %d files, %.0f MiB, %d lines indexed into %d documents (%d by Extract)", len(files), mb, seq, n, docs)
	report(b, "build %.1fs (%.1f MB/s, %.1fx raw); CPU %.1fs (%.1f MB per CPU second; the merges after the last batch not counted)",
		build.Seconds(), mb/build.Seconds(), build.Seconds()/raw.Seconds(), cpu.Seconds(), mb/cpu.Seconds())
	report(b, "index %.0f MiB (%.2fx the sessions); RSS before the build %.0f MiB, peak during the build %.0f MiB (VmHWM); sampled peaks: RSS %.0f MiB, anonymous %.0f MiB, file-backed %.0f MiB",
		float64(diskAfterBuild)/(1<<20), float64(diskAfterBuild)/float64(size), float64(rssBefore)/(1<<20), float64(peak)/(1<<20),
		float64(prss)/(1<<20), float64(panon)/(1<<20), float64(pfile)/(1<<20))
	load, _ := os.ReadFile("/proc/loadavg")
	report(b, "load average: %s", strings.TrimSpace(string(load)))
	if !*benchNoQueries {
		benchQueries(b, ix)
	}
}

// report logs a line to stderr too (a benchmark's log is cut at ten lines).
func report(b *testing.B, format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func benchQueries(b *testing.B, ix *Index) {
	c := newCorpus(1) // the same vocabulary
	v := c.vocab
	queries := []string{
		v[2],                          // among the most frequent words
		v[40],                         // frequent
		v[900],                        // mid
		v[15000],                      // rare
		v[3] + " " + v[300],           // two words
		`"` + v[2] + " " + v[3] + `"`, // phrase of frequent words
		`"` + v[200] + " " + v[400] + `"`,
		v[100] + " -" + v[2],                 // exclusion
		v[50] + " role:toolResult",           // filter
		v[10] + " session:" + "s00042.jsonl", // one session
		"grep " + v[500],
		"nonexistentzzz",
	}
	var lat []time.Duration
	hits := map[string]uint64{}
	approx := map[string]int{} // timed runs whose phrases were matched as words (PhraseBudget)
	per := map[string][]time.Duration{}
	ctx := context.Background()
	for round := range 16 {
		for _, q := range queries {
			pq, err := ParseQuery(q)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			res, err := ix.Search(ctx, pq, DefaultLimit, 0)
			d := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if round > 0 { // the first round warms the caches
				lat = append(lat, d)
				per[q] = append(per[q], d)
				if res.Approximate {
					approx[q]++
				}
			}
			hits[q] = res.Total
		}
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	_, peakAll := rss()
	b.ReportMetric(float64(p(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
	load, _ := os.ReadFile("/proc/loadavg")
	report(b, "queries: %d timed, p50 %v, p90 %v, p99 %v, max %v; peak RSS %.0f MiB", len(lat), p(0.5), p(0.9), p(0.99), lat[len(lat)-1], float64(peakAll)/(1<<20))
	for _, q := range queries {
		ql := per[q]
		slices.Sort(ql)
		report(b, "  %-40q %7d hits  p50 %v  max %v  approximate %d of %d", q, hits[q], ql[len(ql)/2], ql[len(ql)-1], approx[q], len(ql))
	}
	report(b, "load average: %s", strings.TrimSpace(string(load)))
}
