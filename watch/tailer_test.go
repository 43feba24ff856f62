package watch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

func TestAppendsPartialLinesAndDeferredBurst(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--home-u-p--", "2026-11-29T23-08-16-463Z_s1.jsonl")

	// pi's deferred first write: header and several entries at once.
	want := []string{header("s1"), entry("a1", "", "hi"), entry("a2", "a1", "there")}
	writeFile(t, path, strings.Join(want, "\n")+"\n")
	n.waitLines("s1", want)

	// A line written in two pieces is published once, when complete.
	l3 := entry("a3", "a2", "split line")
	appendFile(t, path, l3[:20])
	appendFile(t, path, l3[20:]+"\n")
	want = append(want, l3)
	n.waitLines("s1", want)

	// CRLF: the '\r' is part of the line, byte for byte.
	l4 := entry("a4", "a3", "crlf") + "\r"
	appendFile(t, path, l4+"\n")
	want = append(want, l4)
	n.waitLines("s1", want)
}

func TestPartialLineIsNotPublishedUntilComplete(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "s2.jsonl")
	writeFile(t, path, header("s2")+"\n"+entry("b1", "", "x")[:30])
	n.waitLines("s2", []string{header("s2")})
	// Let several rescans pass over the partial line: it must stay unpublished.
	r0 := n.tailer.Stats().Rescans
	waitFor(t, 10*time.Second, func() (bool, string) { return n.tailer.Stats().Rescans >= r0+3, "rescans" })
	if got := n.lines("s2"); len(got) != 1 {
		t.Fatalf("partial line published: %q", got)
	}
	appendFile(t, path, entry("b1", "", "x")[30:]+"\n")
	n.waitLines("s2", []string{header("s2"), entry("b1", "", "x")})
}

// TestEndedFragmentIsMalformed: a partial line that pi (on opening the
// file) or the replicator (replicate.crashAfter) ends with a lone "\n"
// after its writer died is a complete malformed line: counted, never
// published, and the lines after it are published as usual.
func TestEndedFragmentIsMalformed(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "s9.jsonl")
	writeFile(t, path, header("s9")+"\n"+entry("b1", "", "crash")[:40])
	n.waitLines("s9", []string{header("s9")})
	appendFile(t, path, "\n"+entry("c1", "", "after")+"\n")
	n.waitLines("s9", []string{header("s9"), entry("c1", "", "after")})
	waitFor(t, 10*time.Second, func() (bool, string) {
		m := n.tailer.Stats().Malformed
		return m == 1, fmt.Sprintf("malformed = %d, want 1", m)
	})
	if got := n.lines("s9"); len(got) != 2 {
		t.Fatalf("published %q, want the header and c1", got)
	}
}

func TestMalformedLinesAreCountedNotPublished(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "s3.jsonl")
	writeFile(t, path, strings.Join([]string{
		"garbage before header", "", header("s3"), `{"truncated":`, "42", `"text"`, "null", "   ",
		entry("c1", "", "ok"), `{"a":1}{"b":2}`, "\x00\xff\xfe binary", entry("c2", "c1", "ok2"),
	}, "\n")+"\n")
	n.waitLines("s3", []string{header("s3"), entry("c1", "", "ok"), entry("c2", "c1", "ok2")})
	waitFor(t, 10*time.Second, func() (bool, string) {
		m := n.tailer.Stats().Malformed
		return m == 6, fmt.Sprintf("malformed = %d, want 6", m)
	})
}

func TestNotSessionFilesAreIgnored(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	writeFile(t, filepath.Join(root, "--p--", "entry-first.jsonl"), entry("x", "", "no header")+"\n"+header("nope")+"\n")
	writeFile(t, filepath.Join(root, "--p--", "bom.jsonl"), "\uFEFF"+header("bom")+"\n"+entry("y", "", "z")+"\n")
	writeFile(t, filepath.Join(root, "--p--", "binary.jsonl"), "\x7fELF\x02\x01\x01\x00\x00\n\x00\x00\x00{\n[1,2]\n")
	writeFile(t, filepath.Join(root, "--p--", "notes.txt"), header("txt")+"\n")
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.FilesIgnored == 3, fmt.Sprintf("ignored = %d, want 3", st.FilesIgnored)
	})
	for _, sid := range []string{"nope", "bom", "txt"} {
		if got := n.lines(sid); len(got) != 0 {
			t.Errorf("session %s published from a non-session file: %q", sid, got)
		}
	}
	if st := n.tailer.Stats(); st.LinesPublished != 0 {
		t.Errorf("published %d lines from non-session files", st.LinesPublished)
	}
}

func TestRewriteInPlaceAndTruncation(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "s4.jsonl")
	v2 := `{"type":"session","version":2,"id":"s4","timestamp":"2026-11-29T23:08:16.463Z","cwd":"/p"}`
	hook := `{"type":"message","id":"d2","parentId":"d1","timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"hookMessage","content":"h","timestamp":2}}`
	writeFile(t, path, v2+"\n"+entry("d1", "", "one")+"\n"+hook+"\n")
	n.waitLines("s4", []string{v2, entry("d1", "", "one"), hook})

	// pi migrates v2 to v3 on open: truncate and rewrite in place, same inode.
	v3 := strings.Replace(v2, `"version":2`, `"version":3`, 1)
	custom := strings.Replace(hook, "hookMessage", "custom", 1)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, v3+"\n"+entry("d1", "", "one")+"\n"+custom+"\n")
	f.Close()
	// Unchanged lines are not published again; changed ones are new events.
	n.waitLines("s4", []string{v2, entry("d1", "", "one"), hook, v3, custom})

	// Truncation to a prefix, then new appends.
	if err := os.Truncate(path, int64(len(v3)+1)); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, entry("d3", "", "after truncation")+"\n")
	n.waitLines("s4", []string{v2, entry("d1", "", "one"), hook, v3, custom, entry("d3", "", "after truncation")})
	// Counted as each batch is stored, so by now: the header and d2
	// rewritten by pi's migration are no collision (they were 2 until
	// 2026-12-07).
	if c := n.tailer.Stats().Collisions; c != 0 {
		t.Errorf("collisions = %d, want 0", c)
	}
}

func TestSameSizeRewriteIsNoticed(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "s5.jsonl")
	v2 := `{"type":"session","version":2,"id":"s5","timestamp":"2026-11-29T23:08:16.463Z","cwd":"/p"}`
	writeFile(t, path, v2+"\n"+entry("e1", "", "one")+"\n")
	n.waitLines("s5", []string{v2, entry("e1", "", "one")})
	v3 := strings.Replace(v2, `"version":2`, `"version":3`, 1)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, v3) // same length: only the header's bytes change
	f.Close()
	// Make sure the mtime moves even on coarse-grained file systems.
	later := time.Now().Add(2 * time.Second)
	os.Chtimes(path, later, later)
	n.waitLines("s5", []string{v2, entry("e1", "", "one"), v3})
}

func TestHugeLineIsChunkedAndReassembled(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "s6.jsonl")
	big := entry("f1", "", strings.Repeat("0123456789abcdé", 5<<20/16)) // 5 MiB, multi-byte chars across chunk edges
	writeFile(t, path, header("s6")+"\n")
	appendFile(t, path, big+"\n")
	appendFile(t, path, entry("f2", "f1", "after")+"\n")
	n.waitLines("s6", []string{header("s6"), big, entry("f2", "f1", "after")})
}

func TestOversizeLineIsSkipped(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "s7.jsonl")
	huge := entry("g1", "", strings.Repeat("x", 17<<20)) // over the test's 16 MiB limit
	writeFile(t, path, header("s7")+"\n"+huge+"\n"+entry("g2", "", "next")+"\n")
	n.waitLines("s7", []string{header("s7"), entry("g2", "", "next")})
	if m := n.tailer.Stats().Malformed; m != 1 {
		t.Errorf("malformed = %d, want 1 (the oversize line)", m)
	}
}

// TestOversizeHeaderIsNamed: a session whose header is longer than the
// limit is ignored as such, not as "not a pi session file" (pi loads it:
// a files probe, 2026-12-07), and a restart with a limit that takes it
// publishes the session.
func TestOversizeHeaderIsNamed(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	n := startNodeWith(t, root, state, Options{RescanInterval: 200 * time.Millisecond, MaxLine: 4 << 10}, nil)
	path := filepath.Join(root, "--p--", "s9.jsonl")
	long := `{"type":"session","version":3,"id":"s9","timestamp":"2026-11-29T23:08:16.463Z","cwd":"/home/u/` + strings.Repeat("p", 5<<10) + `"}`
	writeFile(t, path, long+"\n"+entry("k1", "", "one")+"\n")
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.FilesIgnoredBy["first-line-too-long"] == 1, fmt.Sprintf("ignored %v", st.FilesIgnoredBy)
	})
	n.stop()
	n = startNodeWith(t, root, state, Options{RescanInterval: 200 * time.Millisecond, MaxLine: 64 << 10}, nil)
	n.waitLines("s9", []string{long, entry("k1", "", "one")})
}

func TestDeletedWhileReadAndRecreated(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "s8.jsonl")
	writeFile(t, path, header("s8")+"\n"+entry("h1", "", "one")+"\n")
	n.waitLines("s8", []string{header("s8"), entry("h1", "", "one")})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.FilesDeleted == 1 && st.FilesTracked == 0, fmt.Sprintf("%+v", st)
	})
	// The session's last file is gone: a tombstone says so.
	waitFor(t, 10*time.Second, func() (bool, string) {
		evs := n.events("s8")
		last := evs[len(evs)-1]
		return last.Op == "delete" && last.File == "--p--/s8.jsonl", fmt.Sprintf("last event %+v", last)
	})
	// The same session restored (say from the trash) publishes no line
	// again, but says that it is back, before its new lines.
	writeFile(t, path, header("s8")+"\n"+entry("h1", "", "one")+"\n"+entry("h2", "h1", "two")+"\n")
	n.waitLines("s8", []string{header("s8"), entry("h1", "", "one"), entry("h2", "h1", "two")})
	evs := n.events("s8")
	var ops []string
	for _, ev := range evs {
		ops = append(ops, ev.Op)
	}
	if want := []string{"", "", "delete", "restore", ""}; !equalStrings(ops, want) {
		t.Fatalf("events %q, want %q", ops, want)
	}
	if ev := evs[3]; ev.File != "--p--/s8.jsonl" {
		t.Errorf("restore names file %q", ev.File)
	}
}

// TestRestoreWhileStopped: a session deleted, then restored while the
// daemon was not running, is announced as restored once, at start; a
// further restart announces nothing.
func TestRestoreWhileStopped(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	path := filepath.Join(root, "--p--", "s9.jsonl")
	content := header("s9") + "\n" + entry("k1", "", "one") + "\n"
	writeFile(t, path, content)
	n := startNode(t, root, state)
	n.waitLines("s9", []string{header("s9"), entry("k1", "", "one")})
	os.Remove(path)
	waitFor(t, 10*time.Second, func() (bool, string) {
		evs := n.events("s9")
		return evs[len(evs)-1].Op == "delete", "tombstone"
	})
	n.stop()
	writeFile(t, path, content)
	ops := func(n *node) []string {
		var out []string
		for _, ev := range n.events("s9") {
			out = append(out, ev.Op)
		}
		return out
	}
	n = startNode(t, root, state)
	waitFor(t, 10*time.Second, func() (bool, string) {
		got := ops(n)
		return equalStrings(got, []string{"", "", "delete", "restore"}), fmt.Sprintf("events %q", got)
	})
	<-n.tailer.Ready()
	n.stop()
	n = startNode(t, root, state)
	<-n.tailer.Ready()
	if got := ops(n); !equalStrings(got, []string{"", "", "delete", "restore"}) {
		t.Fatalf("after a second restart: events %q", got)
	}
}

func TestRestartPublishesOnlyWhatIsNew(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	n := startNode(t, root, state)
	path := filepath.Join(root, "--p--", "s9.jsonl")
	want := []string{header("s9"), entry("i1", "", "one"), entry("i2", "i1", "two")}
	writeFile(t, path, strings.Join(want, "\n")+"\n")
	n.waitLines("s9", want)
	n.stop()

	// While the daemon is down, pi appends and another file of the same
	// session appears (pi's /export keeps the id).
	appendFile(t, path, entry("i3", "i2", "three")+"\n")
	writeFile(t, filepath.Join(root, "--p--", "export.jsonl"), strings.Join(want[:2], "\n")+"\n"+entry("x9", "i1", "exported")+"\n")
	want = append(want, entry("i3", "i2", "three"), entry("x9", "i1", "exported"))

	n2 := startNode(t, root, state)
	waitFor(t, 30*time.Second, func() (bool, string) {
		got := n2.lines("s9")
		return len(got) == len(want), fmt.Sprintf("%d lines: %q", len(got), clip(got))
	})
	got := n2.lines("s9")
	if !sameSet(got, want) {
		t.Fatalf("after restart:\n got %q\nwant %q", clip(got), clip(want))
	}
	if p := n2.tailer.Stats().LinesPublished; p != 2 {
		t.Errorf("second run published %d lines, want 2", p)
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

func TestThousandSessionsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	root := t.TempDir()
	const sessions, entries = 1000, 5
	for i := 0; i < sessions; i++ {
		var b bytes.Buffer
		sid := fmt.Sprintf("k%04d", i)
		b.WriteString(header(sid) + "\n")
		parent := ""
		for j := 0; j < entries; j++ {
			id := fmt.Sprintf("%s-%d", sid, j)
			b.WriteString(entry(id, parent, "m") + "\n")
			parent = id
		}
		writeFile(t, filepath.Join(root, fmt.Sprintf("--p%d--", i%20), sid+".jsonl"), b.String())
	}
	n := startNode(t, root, t.TempDir())
	waitFor(t, 120*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.LinesPublished == sessions*(entries+1), fmt.Sprintf("published %d", st.LinesPublished)
	})
	info, err := n.log.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != sessions*(entries+1) || info.Subjects != sessions {
		t.Fatalf("stream holds %d messages on %d subjects", info.Messages, info.Subjects)
	}
}

// TestFirstReadReportsProgress: a first start over many existing sessions
// says how far it got while it reads them, and when it is done.
func TestFirstReadReportsProgress(t *testing.T) {
	root := t.TempDir()
	const sessions = 300
	for i := 0; i < sessions; i++ {
		sid := fmt.Sprintf("p%04d", i)
		writeFile(t, filepath.Join(root, "--p--", sid+".jsonl"), header(sid)+"\n"+entry("e1", "", "x")+"\n")
	}
	logs := &testenv.LogBuffer{}
	n := startNodeWith(t, root, t.TempDir(), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))},
		func(tl *Tailer) { tl.progressEvery = time.Millisecond })
	select {
	case <-n.tailer.Ready():
	case <-time.After(60 * time.Second):
		t.Fatal("the first read never finished")
	}
	out := logs.String()
	done := fmt.Sprintf(`msg="session files found at start are read" files=%d lines_published=%d`, sessions, 2*sessions)
	if !strings.Contains(out, done) {
		t.Fatalf("no summary %q in the log:\n%s", done, out)
	}
	if !strings.Contains(out, `msg="reading the session files found at start" files=300`) {
		t.Errorf("no progress line while reading 300 sessions with a 1 ms interval:\n%s", out)
	}
}

// TestFileReplacedByAnotherSession: a session's only file replaced under
// its name by another session's (a file renamed over it, a link swapped
// in) leaves the first session with no file here: its deletion is
// published, as if the file had been removed. A file replaced by a newer
// copy of the same session (an editor's save) publishes none.
func TestFileReplacedByAnotherSession(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	dir := filepath.Join(root, "--p--")
	path := filepath.Join(dir, "r1.jsonl")
	one := header("r1") + "\n" + entry("a1", "", "one") + "\n"
	writeFile(t, path, one)
	n.waitLines("r1", []string{header("r1"), entry("a1", "", "one")})

	// The same session saved again through a rename: a new file, no deletion.
	writeFile(t, filepath.Join(root, "tmp1"), one+entry("a2", "a1", "two")+"\n")
	if err := os.Rename(filepath.Join(root, "tmp1"), path); err != nil {
		t.Fatal(err)
	}
	n.waitLines("r1", []string{header("r1"), entry("a1", "", "one"), entry("a2", "a1", "two")})

	// Another session renamed over it.
	writeFile(t, filepath.Join(root, "tmp2"), header("r2")+"\n"+entry("b1", "", "other")+"\n")
	if err := os.Rename(filepath.Join(root, "tmp2"), path); err != nil {
		t.Fatal(err)
	}
	n.waitLines("r2", []string{header("r2"), entry("b1", "", "other")})
	waitFor(t, 10*time.Second, func() (bool, string) {
		evs := n.events("r1")
		last := evs[len(evs)-1]
		return last.Op == "delete" && last.File == "--p--/r1.jsonl", fmt.Sprintf("r1's last event %+v", last)
	})
	var ops []string
	for _, ev := range n.events("r1") {
		ops = append(ops, ev.Op)
	}
	if want := []string{"", "", "", "delete"}; !equalStrings(ops, want) {
		t.Fatalf("r1's events %q, want %q", ops, want)
	}
	for _, ev := range n.events("r2") {
		if ev.Op != "" {
			t.Fatalf("r2's events hold a %q", ev.Op)
		}
	}

	// A file that is no session any more: its header overwritten by an
	// entry, which no session starts with.
	p3 := filepath.Join(dir, "r3.jsonl")
	writeFile(t, p3, header("r3")+"\n")
	n.waitLines("r3", []string{header("r3")})
	writeFile(t, p3, entry("c1", "", "no header")+"\n")
	waitFor(t, 10*time.Second, func() (bool, string) {
		evs := n.events("r3")
		last := evs[len(evs)-1]
		return last.Op == "delete", fmt.Sprintf("r3's last event %+v", last)
	})
}
