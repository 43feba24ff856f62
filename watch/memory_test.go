package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestGrowingLineIsReadOnce: a 12 MB line written in 256 KiB pieces, each
// seen by the tailer before the next comes, is read once as it grows and
// once more when complete: the bytes read stay within twice the file (plus
// the small checks of each look), not the sum of every partial re-read
// (quadratic: about 280 MB here). The line is published whole, once.
func TestGrowingLineIsReadOnce(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "grow.jsonl")
	writeFile(t, path, header("grow")+"\n")
	n.waitLines("grow", []string{header("grow")})
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	looks := 0
	err = writeBigLine(f, "big", "", 12_000_000, func() {
		// Wait until the tailer has read up to here, so that every
		// piece is one more look at a longer partial line.
		size := fileSize(t, path)
		waitFor(t, 10*time.Second, func() (bool, string) {
			st := n.tailer.Stats()
			return st.BytesRead >= size-int64(len(header("grow")))-1, fmt.Sprintf("read %d of %d", st.BytesRead, size)
		})
		looks++
	})
	if err != nil {
		t.Fatal(err)
	}
	after := entry("after", "big", "small")
	appendLine(t, f, after)
	waitFor(t, 30*time.Second, func() (bool, string) {
		got := n.lines("grow")
		return len(got) == 3 && got[2] == after && len(got[1]) > 11_000_000, fmt.Sprintf("%d lines", len(got))
	})
	size := fileSize(t, path)
	st := n.tailer.Stats()
	t.Logf("%d looks at a %d-byte file read %d bytes; %d bytes of lines held at most", looks, size, st.BytesRead, st.MemoryPeak)
	if limit := 2*size + int64(looks)*2*checkWindow + 1<<20; st.BytesRead > limit {
		t.Fatalf("read %d bytes for a %d-byte file (limit %d)", st.BytesRead, size, limit)
	}
	if st.LinesPublished != 3 || st.MemoryHeld != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestMemoryBudgetBoundsWorkers: eight workers on eight files of 4 MB
// lines hold no more than the budget at once, wait for room instead
// (nothing is lost or published twice), and a line larger than the whole
// budget is still published, alone.
func TestMemoryBudgetBoundsWorkers(t *testing.T) {
	root := t.TempDir()
	var want [][]string
	for i := range 8 {
		sid := fmt.Sprintf("b%d", i)
		path := filepath.Join(root, "--p--", sid+".jsonl")
		writeFile(t, path, header(sid)+"\n")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		for j, id := range []string{"x", "y"} {
			size := 4_000_000
			if i == 0 && j == 1 {
				size = 10_000_000 // more than the whole budget
			}
			if err := writeBigLine(f, id, "", size, nil); err != nil {
				t.Fatal(err)
			}
			appendLine(t, f, entry(id+"-small", id, "small"))
		}
		f.Close()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, splitLines(string(data)))
	}
	const budget = 9 << 20
	n := startNodeWith(t, root, t.TempDir(), Options{Workers: 8, MemoryBudget: budget}, nil)
	for i, lines := range want {
		n.waitLines(fmt.Sprintf("b%d", i), lines)
	}
	st := n.tailer.Stats()
	t.Logf("held at most %d bytes of lines (budget %d), waited %d times", st.MemoryPeak, budget, st.MemoryWaits)
	if st.MemoryPeak > budget || st.MemoryWaits == 0 || st.MemoryHeld != 0 || st.MemoryBudget != budget {
		t.Fatalf("stats %+v", st)
	}
	if st.LinesPublished != 8*5 {
		t.Fatalf("published %d lines, want %d", st.LinesPublished, 8*5)
	}
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		s = s[min(i+1, len(s)):]
	}
	return out
}

// TestIdleSessionsLetGoOfTheirHashes: a session written while the tailer
// runs keeps its lines' hashes while it is in use and lets go of them
// after knownIdle; its next line reads them back from the subject, and
// is published once, its earlier lines not again.
func TestIdleSessionsLetGoOfTheirHashes(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	<-n.tailer.Ready()
	path := filepath.Join(root, "--p--", "idle.jsonl")
	want := []string{header("idle"), entry("a", "", "one")}
	writeFile(t, path, want[0]+"\n"+want[1]+"\n")
	n.waitLines("idle", want)
	loaded := func() bool {
		n.tailer.mu.Lock()
		s := n.tailer.sessions["idle"].s
		n.tailer.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.known != nil
	}
	if !loaded() {
		t.Fatal("a session just written holds no hashes")
	}
	n.tailer.dropKnown(time.Now().Add(-knownIdle / 2))
	if !loaded() {
		t.Fatalf("hashes let go of %v after the session's last line, before knownIdle", knownIdle/2)
	}
	n.tailer.dropKnown(time.Now()) // what the rescan does knownIdle later
	if loaded() {
		t.Fatalf("hashes still held %v after the session's last line", knownIdle)
	}
	// A second file of the session (pi's /export keeps the id) holding
	// its lines and a new one before them, so that it is read from its
	// start: only the new line is not on the subject.
	c := entry("c", "", "zero")
	writeFile(t, filepath.Join(root, "--p--", "idle-copy.jsonl"), want[0]+"\n"+c+"\n"+want[1]+"\n")
	want = append(want, c)
	n.waitLines("idle", want)
	if !loaded() {
		t.Fatal("the session's hashes not read back for its next line")
	}
	if got := n.tailer.Stats().LinesPublished; got != 3 {
		t.Fatalf("%d lines published, want 3", got)
	}
}

// TestRelIsTheEndOfThePath: a tracked file keeps its path and its name
// under the root; the name is the end of the path's memory, not a copy,
// where the path ends with it.
func TestRelIsTheEndOfThePath(t *testing.T) {
	tl := &Tailer{root: "/r/sessions"}
	for _, c := range []struct{ path, want string }{
		{"/r/sessions/--p--/a.jsonl", "--p--/a.jsonl"},
		{"/r/sessions/x/../--p--/a.jsonl", "--p--/a.jsonl"},
		{"/r/other/a.jsonl", "../other/a.jsonl"},
	} {
		got, err := tl.rel(c.path)
		if err != nil || got != c.want {
			t.Errorf("rel(%q) = %q, %v; want %q", c.path, got, err, c.want)
			continue
		}
		if shared := unsafe.StringData(got) == unsafe.StringData(c.path[len(c.path)-len(got):]); shared != strings.HasSuffix(c.path, "/"+got) {
			t.Errorf("rel(%q): shares the path's memory: %v", c.path, shared)
		}
	}
}
