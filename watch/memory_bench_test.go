package watch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// BenchmarkMemory measures what the tailer costs in memory and in bytes
// read for the shapes of input that used to hurt (docs/PERFORMANCE.md,
// Memory):
//
//   - growing: a 60 MB line written in 256 KiB pieces, each followed by an
//     fsync and a 2 ms pause, as a slow writer streams a huge tool result;
//   - tenBy10: a file of ten 10 MB lines present when the tailer starts;
//   - eight: eight files with a 32 MB line each, present at start, read by
//     8 workers under the default budget (128 MiB), and eight-64MiB the
//     same under a 64 MiB budget;
//   - raw: no tailer: the 60 MB line published from memory by
//     eventlog.Local.Publish, what the embedded server costs by itself.
//
// Run one workload per process, so that the peak resident set is the
// workload's:
//
//	go test -run '^$' -bench 'Memory/growing$' -benchtime=1x ./watch/
//
// Reported: peak-rss-MB (VmHWM, reset before the workload), rss-after-MB
// (VmRSS once every line is published, after a GC), rss-20s-MB (20 s and
// a GC later: the runtime has returned freed pages), peak-heap-MB
// (HeapInuse sampled every 10 ms), tailer-held-MB (the most bytes of lines
// the tailer held at once: its budget's high-water mark), file-MB (the
// bytes written), tailer-read-MB (bytes the tailer read from files) and
// read-MB (the process's rchar from /proc/self/io: the tailer's reads
// plus the store's; the embedded server is in-process and talks over a
// pipe).
func BenchmarkMemory(b *testing.B) {
	growing := func(t testing.TB, root string) (int, int64) {
		path := filepath.Join(root, "--p--", "mem.jsonl")
		writeFile(t, path, header("mem")+"\n")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		err = writeBigLine(f, "big", "", 60_000_000, func() {
			f.Sync()
			time.Sleep(2 * time.Millisecond)
		})
		if err != nil {
			t.Fatal(err)
		}
		appendLine(t, f, entry("after", "big", "small"))
		return 3, fileSize(t, path)
	}
	bigLines := func(files, lines, size int) func(t testing.TB, root string) (int, int64) {
		return func(t testing.TB, root string) (int, int64) {
			var total int64
			for i := range files {
				sid := fmt.Sprintf("mem%d", i)
				path := filepath.Join(root, "--p--", sid+".jsonl")
				writeFile(t, path, header(sid)+"\n")
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				parent := ""
				for j := range lines {
					id := fmt.Sprintf("m%d", j)
					if err := writeBigLine(f, id, parent, size, nil); err != nil {
						t.Fatal(err)
					}
					parent = id
				}
				f.Close()
				total += fileSize(t, path)
			}
			return files * (lines + 1), total
		}
	}
	b.Run("growing", func(b *testing.B) { memoryWorkload(b, growing, false, Options{}) })
	b.Run("tenBy10", func(b *testing.B) { memoryWorkload(b, bigLines(1, 10, 10_000_000), true, Options{}) })
	b.Run("eight", func(b *testing.B) {
		memoryWorkload(b, bigLines(8, 1, 32_000_000), true, Options{Workers: 8})
	})
	b.Run("eight-64MiB", func(b *testing.B) {
		memoryWorkload(b, bigLines(8, 1, 32_000_000), true, Options{Workers: 8, MemoryBudget: 64 << 20})
	})
	b.Run("raw", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			n := startNodeWith(b, b.TempDir(), b.TempDir(), Options{}, nil)
			var buf bytes.Buffer
			r, w, _ := os.Pipe()
			go func() {
				writeBigLine(w, "big", "", 60_000_000, nil)
				w.Close()
			}()
			buf.ReadFrom(r)
			r.Close()
			lines := []eventlog.Line{
				eventlog.NewLine([]byte(header("raw")), "raw", "", "session", "--p--/raw.jsonl", 1),
				eventlog.NewLine(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), "big", "", "message", "--p--/raw.jsonl", 2),
			}
			buf = bytes.Buffer{}
			m := startMeasure()
			b.StartTimer()
			if _, _, err := n.log.Publish(context.Background(), "raw", 0, lines); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			runtime.KeepAlive(lines)
			m.report(b, nil, int64(len(lines[1].Raw)))
			n.stop()
			b.StartTimer()
		}
	})
}

// memoryWorkload runs write (before the tailer starts when atStart) and
// waits until the tailer has published every line, measuring all along.
func memoryWorkload(b *testing.B, write func(t testing.TB, root string) (lines int, size int64), atStart bool, o Options) {
	for b.Loop() {
		b.StopTimer()
		root := b.TempDir()
		want, size := 0, int64(0)
		if atStart {
			want, size = write(b, root)
		}
		m := startMeasure()
		b.StartTimer()
		o.RescanInterval, o.MaxLine = time.Second, 64<<20
		n := startNodeWith(b, root, b.TempDir(), o, nil)
		if !atStart {
			want, size = write(b, root)
		}
		waitFor(b, 2*benchWait, func() (bool, string) {
			p := n.tailer.Stats().LinesPublished
			return p == int64(want), fmt.Sprintf("published %d of %d lines", p, want)
		})
		b.StopTimer()
		m.report(b, n.tailer, size)
		n.stop()
		b.StartTimer()
	}
}

// measure samples the heap from its start until report.
type measure struct {
	read0    int64
	peakHeap atomic.Uint64
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startMeasure() *measure {
	debug.FreeOSMemory()
	resetPeakRSS()
	m := &measure{read0: procIO("rchar"), stop: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > m.peakHeap.Load() {
				m.peakHeap.Store(ms.HeapInuse)
			}
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *measure) report(b *testing.B, t *Tailer, size int64) {
	close(m.stop)
	m.wg.Wait()
	const mb = 1e6
	b.ReportMetric(float64(testenv.ProcStatus("VmHWM"))/mb, "peak-rss-MB")
	b.ReportMetric(float64(m.peakHeap.Load())/mb, "peak-heap-MB")
	b.ReportMetric(float64(procIO("rchar")-m.read0)/mb, "read-MB")
	b.ReportMetric(float64(size)/mb, "file-MB")
	if t != nil {
		st := t.Stats()
		b.ReportMetric(float64(st.BytesRead)/mb, "tailer-read-MB")
		b.ReportMetric(float64(st.MemoryPeak)/mb, "tailer-held-MB")
	}
	runtime.GC()
	b.ReportMetric(float64(testenv.ProcStatus("VmRSS"))/mb, "rss-after-MB")
	time.Sleep(20 * time.Second)
	runtime.GC()
	b.ReportMetric(float64(testenv.ProcStatus("VmRSS"))/mb, "rss-20s-MB")
}

// writeBigLine appends a pi-like message entry of about size bytes and its
// '\n' to f in 256 KiB writes, calling each (when not nil) after every
// write, without ever holding the line.
func writeBigLine(f *os.File, id, parent string, size int, each func()) error {
	head, tail, _ := strings.Cut(entry(id, parent, "@@PAD@@"), "@@PAD@@")
	const piece = 256 << 10
	pad := []byte(strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", piece/57+1)[:piece])
	left := size - len(head) - len(tail)
	buf := make([]byte, 0, piece+len(head)+len(tail)+1)
	for first := true; first || left > 0; first = false {
		buf = buf[:0]
		if first {
			buf = append(buf, head...)
		}
		n := min(piece, max(left, 0))
		buf = append(buf, pad[:n]...)
		if left -= n; left <= 0 {
			buf = append(buf, tail+"\n"...)
		}
		if _, err := f.Write(buf); err != nil {
			return err
		}
		if each != nil {
			each()
		}
	}
	return nil
}

func appendLine(t testing.TB, f *os.File, l string) {
	if _, err := f.WriteString(l + "\n"); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t testing.TB, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// resetPeakRSS resets VmHWM to the current RSS (Linux 4.0 and later; a
// no-op elsewhere).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// procIO reads a field of /proc/self/io (0 where there is none).
func procIO(field string) int64 { return procField("/proc/self/io", field) }

func procField(file, field string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		return n
	}
	return 0
}
