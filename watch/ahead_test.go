package watch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// longSession writes a session of n entries of about size bytes each and
// returns its lines and the file offset after each line.
func longSession(t *testing.T, path, sid string, n, size int) (lines []string, ends []int64) {
	t.Helper()
	var sb strings.Builder
	add := func(l string) {
		lines = append(lines, l)
		sb.WriteString(l)
		sb.WriteByte('\n')
		ends = append(ends, int64(sb.Len()))
	}
	add(header(sid))
	pad := strings.Repeat("x", size)
	parent := ""
	for i := range n {
		id := fmt.Sprintf("%08x", i+1)
		add(entry(id, parent, pad))
		parent = id
	}
	writeFile(t, path, sb.String())
	return lines, ends
}

// TestFirstReadReadsWhileStoring: while a full batch of a long first read
// is being stored, the worker reads the next one. The store's first
// publish is held until the tailer has read well past that batch (and is
// failed if that never happens), which the read-one-batch-then-wait order
// could never do; then every line is stored once, in file order.
func TestFirstReadReadsWhileStoring(t *testing.T) {
	// Three and a half batches of flushLines; the first ends at line
	// flushLines, the second batch's reading is well under way at
	// 1.9 × flushLines (the read buffer is far smaller than a batch).
	readsWhileStoring(t, "long0000-0000-7000-8000-000000000000", 3*flushLines+flushLines/2, 1024, flushLines)
}

// TestFirstReadReadsLongLinesWhileStoring: the same with lines of 1 MiB,
// four times the read buffer (pi's base64 images are 1-4 MB), which are
// kept as they go by: asking whether the session holds one must not
// wait for the batch being stored (its publish holds the session).
func TestFirstReadReadsLongLinesWhileStoring(t *testing.T) {
	const size = 4 * readBufSize
	batch := (flushBytes + size - 1) / size // lines of the first batch
	readsWhileStoring(t, "long0000-0000-7000-8000-000000000002", 3*batch+batch/2, size, batch)
}

// readsWhileStoring writes a session of entries of about size bytes each,
// holds the store's first publish (a batch of batch lines) until the
// tailer has read to 1.9 batches, and waits for every line.
func readsWhileStoring(t *testing.T, sid string, entries, size, batch int) {
	root := t.TempDir()
	path := filepath.Join(root, "--p--", "long.jsonl")
	want, ends := longSession(t, path, sid, entries, size)
	past := ends[batch*19/10]

	var (
		calls   atomic.Int64
		tailer  atomic.Pointer[Tailer]
		readOn  atomic.Bool
		blocked = errors.New("the tailer did not read on while its first batch was stored")
	)
	n := startNodeWith(t, root, t.TempDir(), Options{}, func(tl *Tailer) {
		tailer.Store(tl)
		tl.log.(*eventlog.Local).SetWritable(func() context.Context {
			if calls.Add(1) != 1 {
				return context.Background()
			}
			deadline := time.Now().Add(15 * time.Second) // within waitLines' 30 s: the retry stores the lines, the test says why it failed
			for tailer.Load().bytesRead.Load() < past {
				if time.Now().After(deadline) {
					ctx, cancel := context.WithCancelCause(context.Background())
					cancel(blocked)
					return ctx
				}
				time.Sleep(time.Millisecond) // polling a counter, bounded by the deadline
			}
			readOn.Store(true)
			return context.Background()
		})
	})
	n.waitLines(sid, want)
	if !readOn.Load() {
		t.Fatal(blocked)
	}
	if p := n.tailer.publishErrors.Load(); p != 0 {
		t.Errorf("%d failed publishes, want none", p)
	}
}

// TestFirstReadAheadFailure: when the batch in flight fails, the read
// stops there, the batch read meanwhile is not stored before it, and the
// retry stores every line once, in file order.
func TestFirstReadAheadFailure(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "--p--", "long.jsonl")
	const sid = "long0000-0000-7000-8000-000000000001"
	want, _ := longSession(t, path, sid, 4*flushLines, 512)
	var calls atomic.Int64
	n := startNodeWith(t, root, t.TempDir(), Options{}, func(tl *Tailer) {
		tl.log.(*eventlog.Local).SetWritable(func() context.Context {
			if calls.Add(1) != 2 {
				return context.Background()
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(errors.New("no space left on device (test)"))
			return ctx
		})
	})
	n.waitLines(sid, want)
	if p := n.tailer.publishErrors.Load(); p != 1 {
		t.Errorf("%d failed publishes, want the one", p)
	}
}
