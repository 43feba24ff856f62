package projection

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
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
	var got bytes.Buffer
	if err := n.worker.WriteContext(context.Background(), &got, sid, "", n.worker.Rules()); err != nil {
		t.Fatal(err)
	}
	if rulesFields.ReplaceAllString(got.String(), "{") != want {
		t.Fatalf("streamed %d bytes, differ from the built context (%d bytes)", got.Len(), len(want))
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
func (rssMeter) field(name string) int64 { return testenv.ProcStatus(name) }

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

// TestContextErrorAfterStreamBegan: a body that is gone when the answer
// is already being sent (here a message deleted from the stream, late in
// a 2.4 MB context) ends the answer early with the error in the
// ErrorTrailer trailer; the same failure within the first MiB gets a
// status instead.
func TestContextErrorAfterStreamBegan(t *testing.T) {
	root := t.TempDir()
	sidBig, sidSmall := "0199eeee-0000-7000-8000-000000000002", "0199eeee-0000-7000-8000-000000000003"
	for _, c := range []struct {
		sid string
		n   int
	}{{sidBig, 300}, {sidSmall, 10}} {
		var data bytes.Buffer
		writeSession(&data, c.sid, c.n, 8<<10, 0, 0, nil)
		writeFile(t, filepath.Join(root, "--mem--", "2026-11-29T23-08-16-463Z_"+c.sid+".jsonl"), data.Bytes())
	}
	n := startNode(t, root, t.TempDir())
	n.worker.opts.MaxBodyBytes = 1 // keep no window: every query reads the stream
	n.worker.opts.SessionsDir = "" // and only the stream: the files still hold the line deleted below
	srv := httptest.NewServer(n.worker.Handler())
	defer srv.Close()
	ctx := context.Background()
	for sid, entries := range map[string]int{sidBig: 300, sidSmall: 10} {
		waitFor(t, 60*time.Second, func() (bool, string) {
			var cv ContextView
			n.kvGet(sessionKey(sid, "ctx"), &cv)
			return cv.Entries == entries, fmt.Sprintf("%d of %d entries projected", cv.Entries, entries)
		})
		s := n.worker.lookup(sid, false)
		ix, err := n.worker.index(ctx, s, "", n.worker.Rules())
		if err != nil {
			t.Fatal(err)
		}
		last := ix.Refs[len(ix.Refs)-1]
		st, err := n.worker.js.Stream(ctx, refStream(last))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteMsg(ctx, refSeq(last)); err != nil {
			t.Fatal(err)
		}
	}
	get := func(sid string) (*http.Response, []byte) {
		resp, err := http.Get(srv.URL + "/context?session=" + sid)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	resp, body := get(sidBig)
	msg := resp.Trailer.Get(ErrorTrailer)
	t.Logf("status %d, %d bytes, trailer %q", resp.StatusCode, len(body), msg)
	if resp.StatusCode != http.StatusOK || len(body) < pendingMax || json.Valid(body) || !strings.Contains(msg, "not found") {
		t.Errorf("big: status %d, %d bytes (valid JSON %v, %.200s), trailer %q", resp.StatusCode, len(body), json.Valid(body), body, msg)
	}
	resp, body = get(sidSmall)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "not found") || resp.Trailer.Get(ErrorTrailer) != "" {
		t.Errorf("small: status %d, body %.200s", resp.StatusCode, body)
	}
}

// blockedWriter takes nothing until release is closed: a reader of a
// context answer that does not read.
type blockedWriter struct{ release <-chan struct{} }

func (b blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	return len(p), nil
}

// TestContextQueriesShareTheReadAhead: context queries read bodies two at
// a time, each with half of Options.ReadAhead, and the others wait: each
// read ahead the whole of it before, and twenty at once took a daemon of a
// 512 MiB budget to 912 MB (a probe, 2026-12-07). The ones waiting go on
// once those before them end, and every answer is whole.
func TestContextQueriesShareTheReadAhead(t *testing.T) {
	root := t.TempDir()
	sid := "0199eeee-0000-7000-8000-000000000002"
	data := linear(sid, 50, 100)
	writeFile(t, filepath.Join(root, "--mem--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl"), data)
	want := fileContext(t, data)
	n := startNode(t, root, t.TempDir())
	n.waitContext(sid, want)
	release := make(chan struct{})
	const queries = 6
	errs := make(chan error, queries)
	for range queries {
		go func() {
			errs <- n.worker.WriteContext(t.Context(), blockedWriter{release}, sid, "", n.worker.Rules())
		}()
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		r, w := int64(len(n.worker.contextSlots)), n.worker.contextWaiting.Load()
		return r == contextQueries && w == queries-contextQueries, fmt.Sprintf("%d queries reading, %d waiting; want %d and %d", r, w, contextQueries, queries-contextQueries)
	})
	if got, want := n.worker.readAhead(), n.worker.opts.ReadAhead/contextQueries; n.worker.opts.ReadAhead > 0 && got != want {
		t.Errorf("a query reads ahead %d bytes, want %d", got, want)
	}
	close(release)
	for range queries {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if r, w := int64(len(n.worker.contextSlots)), n.worker.contextWaiting.Load(); r != 0 || w != 0 {
		t.Errorf("after the answers: %d reading, %d waiting", r, w)
	}
}
