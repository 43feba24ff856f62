package projection

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestContextQueryReadsAhead: a 12 MB context (1500 entries of 8 KB, then
// a compaction that keeps the entries from the 100th on, then 100 more)
// is written by WriteContext byte for byte as the built context, while the
// query holds at most its read-ahead (1 MiB here) of bodies at once; the
// window, larger than the body cache, is not kept. The compaction makes
// the window's order leave stream order (its summary first, the kept
// entries after), across many stretches.
func TestContextQueryReadsAhead(t *testing.T) {
	root := t.TempDir()
	sid := "0199eeee-0000-7000-8000-000000000001"
	var data bytes.Buffer
	bw := bufio.NewWriter(&data)
	line := writeSession(bw, sid, 1500, 8<<10, 100, 100, nil)
	bw.Flush()
	writeFile(t, filepath.Join(root, "--mem--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl"), data.Bytes())
	want := fileContext(t, data.Bytes())
	n := startNode(t, root, t.TempDir())
	const ahead = 1 << 20
	n.worker.opts.ReadAhead, n.worker.opts.MaxBodyBytes = ahead, 4<<20
	waitFor(t, 60*time.Second, func() (bool, string) {
		got := n.contextJSON(sid)
		return got == want, fmt.Sprintf("context %.200s", got)
	})
	n.worker.readAheadPeak.Store(0)
	if got := n.writtenContext(sid); got != want {
		t.Fatalf("streamed %d bytes, differ from the built context (%d bytes)", len(got), len(want))
	}
	st := n.worker.Stats()
	t.Logf("context %d bytes, read ahead at most %d bytes", len(want), st.ReadAheadPeak)
	if st.ReadAheadPeak > ahead+int64(line) || st.ReadAheadPeak == 0 {
		t.Errorf("read ahead %d bytes at most; want within %d + one line (%d)", st.ReadAheadPeak, ahead, line)
	}
	s := n.worker.lookup(sid, false)
	s.mu.Lock()
	kept := s.bodies
	s.mu.Unlock()
	if kept != nil {
		t.Errorf("a window larger than the body cache was kept (%d bytes)", kept.bytes)
	}
}

// writeSession writes a linear session of n entries of about size bytes
// each; with compactAt > 0, a compaction follows the compactAt-th last
// entry, keeping the entries from the keep-th on. image (when not nil)
// gives each entry an image block of that many base64 bytes instead of
// text. It returns the longest line's length.
func writeSession(w io.Writer, sid string, n, size, keep, after int, image func(i int) int) int {
	fmt.Fprintln(w, header(sid))
	longest := 0
	rng := rand.New(rand.NewChaCha8([32]byte{}))
	raw := make([]byte, 3<<20)
	parent := ""
	put := func(l string) {
		longest = max(longest, len(l))
		io.WriteString(w, l+"\n")
	}
	for i := range n + after {
		id := fmt.Sprintf("e%07d", i)
		if i == n && keep > 0 {
			put(fmt.Sprintf(`{"type":"compaction","id":"c1","parentId":%q,"timestamp":"2026-11-29T23:09:00.000Z","summary":"what came before","firstKeptEntryId":"e%07d","tokensBefore":1000}`, parent, keep))
			parent = "c1"
		}
		var l string
		if image != nil {
			b := raw[:image(i)*3/4]
			for k := 0; k < len(b); k += 8 {
				v := rng.Uint64()
				copy(b[k:], []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24), byte(v >> 32), byte(v >> 40), byte(v >> 48), byte(v >> 56)})
			}
			l = strings.Replace(entry(id, parent, "@@"), `"content":"@@"`,
				`"content":[{"type":"text","text":"a screenshot"},{"type":"image","data":"`+base64.StdEncoding.EncodeToString(b)+`","mimeType":"image/png"}]`, 1)
		} else {
			l = entry(id, parent, fmt.Sprintf("message %d %s", i, strings.Repeat("x", max(0, size-200))))
		}
		put(l)
		parent = id
	}
	return longest
}

// rssMeter reads the process's resident set (Linux; zero elsewhere).
type rssMeter struct{}

// reset makes VmHWM the current resident set (Linux 4.0 and later).
func (rssMeter) reset() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// field is a "kB" field of /proc/self/status, in bytes.
func (rssMeter) field(name string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == name {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

// hashWriter counts and hashes what is written to it.
type hashWriter struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func newHashWriter() *hashWriter { return &hashWriter{h: sha256.New()} }

func (w *hashWriter) Write(b []byte) (int, error) {
	w.n += int64(len(b))
	return w.h.Write(b)
}

func (w *hashWriter) sum() string { return fmt.Sprintf("%x", w.h.Sum(nil)) }
