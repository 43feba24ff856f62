package watch

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// sessionsAround writes n ordinary sessions under root (spread over the
// workers by their paths) and returns their ids.
func sessionsAround(t *testing.T, root, prefix string, n int) []string {
	t.Helper()
	var sids []string
	for i := range n {
		sid := fmt.Sprintf("%s%02d", prefix, i)
		writeFile(t, filepath.Join(root, "--p--", sid+".jsonl"), header(sid)+"\n"+entry("e1", "", sid)+"\n")
		sids = append(sids, sid)
	}
	return sids
}

func waitSessions(n *node, sids []string) {
	for _, sid := range sids {
		n.waitLines(sid, []string{header(sid), entry("e1", "", sid)})
	}
}

// stopWithin stops n and fails if that takes longer than d (a worker stuck
// in a blocking call would make it hang forever).
func stopWithin(t *testing.T, n *node, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		n.stop()
		close(done)
	}()
	select {
	case <-done:
		t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(d):
		t.Fatalf("the tailer did not stop within %v", d)
	}
}

// TestSpecialFilesAreSkipped: a FIFO named *.jsonl present at start, one
// made later, a unix socket named *.jsonl and a link that leads round in a
// loop (before, retried for ever) are never opened for reading:
// every other session is published (those that share a worker with the
// FIFO too), the first read completes, they are counted as ignored, and
// the tailer stops at once.
func TestSpecialFilesAreSkipped(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "--p--"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "--p--", "x.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop.jsonl", filepath.Join(root, "--p--", "loop.jsonl")); err != nil {
		t.Fatal(err)
	}
	before := sessionsAround(t, root, "before", 16)
	n := startNode(t, root, t.TempDir())
	select {
	case <-n.tailer.Ready():
	case <-time.After(20 * time.Second):
		// Free the stuck worker (a writer lets its open return), so
		// that the test fails instead of hanging in the tailer's stop.
		if w, err := os.OpenFile(filepath.Join(root, "--p--", "x.jsonl"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("the first read never ended: a worker is stuck on the FIFO")
	}
	waitSessions(n, before)

	if err := syscall.Mkfifo(filepath.Join(root, "--q--.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(root, "--p--", "y.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	after := sessionsAround(t, root, "after", 16)
	waitSessions(n, after)
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.FilesIgnoredBy["not-a-regular-file"] == 4 && st.FilesIgnored == 4,
			fmt.Sprintf("ignored %d %v, want 4 not-a-regular-file", st.FilesIgnored, st.FilesIgnoredBy)
	})
	// Rescans go over them again without a word or an error.
	r0 := n.tailer.Stats().Rescans
	waitFor(t, 10*time.Second, func() (bool, string) { return n.tailer.Stats().Rescans >= r0+3, "rescans" })
	if st := n.tailer.Stats(); st.FilesIgnored != 4 || st.LastError != "" || n.tailer.Retrying() != 0 {
		t.Fatalf("after rescans: %d retrying, %+v", n.tailer.Retrying(), st)
	}
	// A FIFO replaced by a real session file is read.
	fifo := filepath.Join(root, "--p--", "x.jsonl")
	os.Remove(fifo)
	writeFile(t, fifo, header("was-fifo")+"\n")
	n.waitLines("was-fifo", []string{header("was-fifo")})
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.FilesIgnored == 3, fmt.Sprintf("ignored %d, want 3", st.FilesIgnored)
	})
	stopWithin(t, n, 5*time.Second)
}

// TestOpenRegularNeverBlocks: a FIFO swapped in between the caller's stat
// and the open (here: opened directly) is refused without blocking.
func TestOpenRegularNeverBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swapped.jsonl")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		fh, st, err := openRegular(path)
		if fh != nil || st == nil || st.Mode()&os.ModeNamedPipe == 0 {
			err = fmt.Errorf("openRegular = %v, %v, %v; want nil and the FIFO's stat", fh, st, err)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the open so the goroutine ends, then fail.
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("openRegular blocked on a FIFO")
	}
}

// TestLongSessionIDIsRefusedForThatFileAlone: a header whose id would make
// a subject longer than eventlog.MaxSIDToken is never published, so no
// subject is ever built from it; the file is counted and logged once as
// ignored, and every other session goes on as usual, with one whose id is
// at the limit.
func TestLongSessionIDIsRefusedForThatFileAlone(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("x", 5000)
	writeFile(t, filepath.Join(root, "--p--", "long.jsonl"), header(long)+"\n"+entry("l1", "", "never")+"\n")
	atLimit := strings.Repeat("y", 256)
	writeFile(t, filepath.Join(root, "--p--", "limit.jsonl"), header(atLimit)+"\n")
	// 190 bytes with a '.': "~" + 254 characters of base64; 192: 257.
	dotted, tooDotted := strings.Repeat("a.", 95), strings.Repeat("a.", 96)
	writeFile(t, filepath.Join(root, "--p--", "dotted.jsonl"), header(dotted)+"\n")
	writeFile(t, filepath.Join(root, "--p--", "too-dotted.jsonl"), header(tooDotted)+"\n")
	normal := sessionsAround(t, root, "n", 8)
	logs := &testenv.LogBuffer{}
	n := startNodeWith(t, root, t.TempDir(), Options{RescanInterval: 100 * time.Millisecond, Logger: newTestLogger(logs)}, nil)
	waitSessions(n, normal)
	n.waitLines(atLimit, []string{header(atLimit)})
	n.waitLines(dotted, []string{header(dotted)})
	appendFile(t, filepath.Join(root, "--p--", "long.jsonl"), entry("l2", "l1", "still never")+"\n")
	r0 := n.tailer.Stats().Rescans
	waitFor(t, 10*time.Second, func() (bool, string) { return n.tailer.Stats().Rescans >= r0+3, "rescans" })
	st := n.tailer.Stats()
	if st.FilesIgnoredBy["session-id-too-long"] != 2 || st.LastError != "" || st.PublishErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
	if got := strings.Count(logs.String(), "session id too long for a subject"); got != 2 {
		t.Errorf("logged %d times, want once per file:\n%s", got, logs.String())
	}
	// More sessions after it, live.
	later := sessionsAround(t, root, "later", 4)
	waitSessions(n, later)
	info, err := n.log.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(2*len(normal) + 2*len(later) + 2); info.Messages != want {
		t.Fatalf("stream holds %d messages, want %d", info.Messages, want)
	}
}

// TestEnvelopeTooLongToCarry: an entry whose id is 900 KiB long cannot be
// published (each of its messages would carry it in a header, past the
// server's max_payload): it is skipped and counted, and the lines around
// it are published instead of the whole file being held up for good.
func TestEnvelopeTooLongToCarry(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "envelope.jsonl")
	before, after := entry("a", "", "before"), entry("b", "a", "after")
	writeFile(t, path, header("env")+"\n"+before+"\n"+entry(strings.Repeat("i", 900<<10), "a", "x")+"\n"+
		entry("c", strings.Repeat("p", 9<<10), "long parent")+"\n"+after+"\n")
	n.waitLines("env", []string{header("env"), before, after})
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.Malformed == 2 && st.PublishErrors == 0, fmt.Sprintf("%+v", st)
	})
}

// TestPollableFileIsSkipped: a kernel file that says it is a regular one
// but whose reads wait for data (/proc/kmsg, linked into the sessions
// dir) parked its worker's read for good, and every other file of that
// worker with it (a probe on 2026-12-06). Such a file is left alone as
// not a regular file. /proc/self/mounts stands in for /proc/kmsg here:
// pollable the same way, but its reads return at once and consume nothing.
func TestPollableFileIsSkipped(t *testing.T) {
	const kernel = "/proc/self/mounts"
	if _, err := os.Stat(kernel); err != nil {
		t.Skipf("needs %s (Linux): %v", kernel, err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "--p--"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(kernel, filepath.Join(root, "--p--", "k.jsonl")); err != nil {
		t.Fatal(err)
	}
	sids := sessionsAround(t, root, "s", 16)
	n := startNode(t, root, t.TempDir())
	waitSessions(n, sids)
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.FilesIgnoredBy["not-a-regular-file"] == 1 && st.FilesIgnored == 1,
			fmt.Sprintf("ignored %d %v, want 1 not-a-regular-file", st.FilesIgnored, st.FilesIgnoredBy)
	})
}

// TestSlowFileNamed: a file a worker has been on for long (here its
// session's load, held up) is named in Stats and in the log, once; the
// worker's other files wait for it, and nothing said which it was.
func TestSlowFileNamed(t *testing.T) {
	root := t.TempDir()
	release := make(chan struct{})
	var logs testenv.LogBuffer
	o := Options{RescanInterval: 50 * time.Millisecond, Logger: logs.Logger(), Known: func(ctx context.Context, sid string, _ func([32]byte)) error {
		if sid == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	n := startNodeWith(t, root, t.TempDir(), o, func(t *Tailer) { t.slowAfter = 100 * time.Millisecond })
	writeFile(t, filepath.Join(root, "--p--", "slow.jsonl"), header("slow")+"\n"+entry("e1", "", "slow")+"\n")
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return len(st.SlowFiles) == 1 && st.SlowFiles[0].File == "--p--/slow.jsonl", fmt.Sprintf("slow files %+v", st.SlowFiles)
	})
	waitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Count(logs.String(), "level=WARN msg=\"a session file has been read for long") == 1 && strings.Contains(logs.String(), "file=--p--/slow.jsonl"), logs.String()
	})
	close(release)
	n.waitLines("slow", []string{header("slow"), entry("e1", "", "slow")})
	if st := n.tailer.Stats(); len(st.SlowFiles) != 0 {
		t.Errorf("after the read: slow files %+v", st.SlowFiles)
	}
	if c := strings.Count(logs.String(), "a session file has been read for long"); c != 1 {
		t.Errorf("named %d times, want once:\n%s", c, logs.String())
	}
}

// TestSlowReadMovesOn: a long read that takes megabytes a second is a
// large session being read (pi wrote 58 MB in seconds, and its read took
// 13 s: a warning told its user to move the file out); one that takes next
// to nothing is one that does not answer.
func TestSlowReadMovesOn(t *testing.T) {
	for _, c := range []struct {
		read int64
		took time.Duration
		want bool
	}{
		{58 << 20, 13 * time.Second, true},
		{0, 13 * time.Second, false},
		{1 << 20, 10 * time.Second, false},
		{20 << 20, 10 * time.Second, true},
	} {
		if got := movesOn(c.read, c.took); got != c.want {
			t.Errorf("movesOn(%d bytes, %v) = %v, want %v", c.read, c.took, got, c.want)
		}
	}
}
