package watch

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// BenchmarkBigSession measures the tailer's first read of one large session
// present at start, against publishing the same lines with
// eventlog.Local.Publish (calls of as many bytes as the tailer publishes at
// once, lines over a chunk split as the tailer splits them) on a fresh
// server of its own, in the same run, ABBA:
//
//   - lines: 100,000 entries of 2 KB (about 200 MB), a long conversation
//     (PISYNC_BENCH_LINE_BYTES sets another size: how cost grows with it);
//   - images: entries holding one base64 image of 1-4 MB each, as pi writes
//     a pasted screenshot (about 200 MB; PISYNC_BENCH_BIG_MB=1024 for the
//     1 GB session of issue 11).
//
// Reported: lines/s and MB/s of each side, and rate/base-rate. The corpus
// the baseline publishes is held outside the Go heap (offHeap), as a raw
// publisher that maps the session's file would hold it: it paces neither
// side's collector.
//
//	go test -run '^$' -bench BigSession -benchtime=1x -timeout 60m ./watch/
func BenchmarkBigSession(b *testing.B) {
	mb := testenv.EnvInt(b, "PISYNC_BENCH_BIG_MB", 200, 10, math.MaxInt)
	line := testenv.EnvInt(b, "PISYNC_BENCH_LINE_BYTES", 2048, 256, mb<<20) // up to the session's size
	b.Run("lines", func(b *testing.B) { benchBigSession(b, bigLines(b, mb<<20, line)) })
	b.Run("images", func(b *testing.B) { benchBigSession(b, bigImages(b, mb<<20)) })
}

func benchBigSession(b *testing.B, s benchSession) {
	profiled := false
	tail, base, runs := abba(b,
		func() time.Duration {
			// The first tailer run's timed part alone: not the corpus's
			// making, its file's writing or the baseline.
			var timed func() func()
			if !profiled {
				profiled = true
				timed = func() func() { return testenv.CPUProfile(b, "PISYNC_BENCH_CPUPROFILE") }
			}
			return tailerRun(b, []benchSession{s}, 10*benchWait, timed)
		},
		func() time.Duration { return bigBaseline(b, s) })
	lines, mbs := float64(runs*len(s.lines)), float64(runs*len(s.data))/1e6
	b.ReportMetric(lines/tail.Seconds(), "lines/s")
	b.ReportMetric(lines/base.Seconds(), "base-lines/s")
	b.ReportMetric(mbs/tail.Seconds(), "MB/s")
	b.ReportMetric(mbs/base.Seconds(), "base-MB/s")
	b.ReportMetric(base.Seconds()/tail.Seconds(), "rate/base-rate")
	b.Logf("%d lines, %.0f MB: tailer %.1f MB/s, baseline %.1f MB/s", len(s.lines), float64(len(s.data))/1e6,
		mbs/tail.Seconds(), mbs/base.Seconds())
}

// offHeap is a copy of text in memory of its own, outside the Go heap:
// held in the heap, the corpus (as large as the session) set the
// collector's goal for the whole run, so the tailer's garbage grew the heap
// by hundreds of MB, every page of it a fault on its first run in the
// process (the images session: 1.4-1.5 s against 0.8 s warm, 2026-12-05),
// where the daemon holds no such thing.
func offHeap(b *testing.B, text string) []byte {
	b.Helper()
	data, err := unix.Mmap(-1, 0, len(text), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.Fatalf("map %d bytes for the corpus: %v", len(text), err)
	}
	b.Cleanup(func() { unix.Munmap(data) })
	copy(data, text)
	return data
}

// bigCall is how many of lines the tailer's read would send as one batch
// (batchFull), and so one baseline Publish call: the same batches, so the
// ratio is the tailer's own cost. Larger calls are faster for large lines
// (64 MiB ones stored the images session about twice as fast), at the
// price of the server staging that much per batch in memory.
func bigCall(lines []eventlog.Line) int {
	k, size := 0, 0
	for k < len(lines) && !batchFull(k, size) {
		size += len(lines[k].Raw)
		k++
	}
	return k
}

// bigSID is the one session's id.
const bigSID = "big00000-0000-7000-8000-000000000000"

// bigSession builds a session of the given entry lines after a header, its
// bytes held outside the Go heap (offHeap).
func bigSession(b *testing.B, n int, line func(i int, id, parent string) string) benchSession {
	s := benchSession{sid: bigSID, rel: "--home-u-p--/2026-11-29T23-08-16-463Z_" + bigSID + ".jsonl"}
	var sb strings.Builder
	add := func(raw, id, parent, typ string) {
		sb.WriteString(raw)
		sb.WriteByte('\n')
		s.lines = append(s.lines, eventlog.Line{ID: id, ParentID: parent, Type: typ, File: s.rel, Off: int64(sb.Len())})
	}
	add(header(bigSID), bigSID, "", "session")
	parent := ""
	for i := range n {
		id := fmt.Sprintf("%08x", i+1)
		add(line(i, id, parent), id, parent, "message")
		parent = id
	}
	s.data = offHeap(b, sb.String())
	// The lines alias the file's bytes, as the tailer's do once read.
	start := int64(0)
	for i, l := range s.lines {
		end := l.Off - 1 // its '\n'
		s.lines[i] = eventlog.NewLine(s.data[start:end:end], l.ID, l.ParentID, l.Type, s.rel, l.Off)
		start = l.Off
	}
	runtime.GC() // the builder's copy, gone before the first run
	return s
}

// bigLines is a session of size bytes in lines of about lineSize.
func bigLines(b *testing.B, size, lineSize int) benchSession {
	return bigSession(b, size/lineSize, func(_ int, id, parent string) string { return piLine(id, parent, lineSize) })
}

// bigImages is a session of about size bytes of user messages that each
// carry one image of 1-4 MB in base64 (random bytes: no compression helps).
func bigImages(b *testing.B, size int) benchSession {
	rng := rand.New(rand.NewPCG(1, 2))
	var sizes []int
	for total := 0; total < size; {
		n := (1 + rng.IntN(3)) << 20
		sizes = append(sizes, n)
		total += n * 4 / 3
	}
	raw := make([]byte, 4<<20)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return bigSession(b, len(sizes), func(i int, id, parent string) string {
		p := "null"
		if parent != "" {
			p = strconv.Quote(parent)
		}
		data := base64.StdEncoding.EncodeToString(raw[:sizes[i]])
		return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%s,"timestamp":"2026-11-29T23:08:17.000Z","message":{"role":"user","content":[{"type":"text","text":"what is on this screen?"},{"type":"image","data":"%s","mimeType":"image/png"}],"timestamp":1}}`, id, p, data)
	})
}

// bigBaseline times eventlog publishing of s's lines, in the tailer's batches
// (bigCall).
func bigBaseline(b *testing.B, s benchSession) time.Duration {
	lg, closeRun := runLog(b)
	defer closeRun()
	ctx, cancel := context.WithTimeout(context.Background(), 10*benchWait)
	defer cancel()
	syscall.Sync()
	start := time.Now()
	var last uint64
	for lines := s.lines; len(lines) > 0; {
		// The tailer's batches: one call with every line would be one
		// atomic batch of hundreds of MB.
		k := bigCall(lines)
		seq, n, err := lg.Publish(ctx, s.sid, last, lines[:k])
		if err == nil && n != k {
			err = fmt.Errorf("stored %d of %d lines", n, k)
		}
		if err != nil {
			b.Fatalf("baseline publish: %v", err)
		}
		last, lines = seq, lines[k:]
	}
	elapsed := time.Since(start)
	checkStored(b, lg, []benchSession{s})
	return elapsed
}
