package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// editInPlace overwrites old with new (same length) where it is in the
// file, without changing the size, and moves mtime on so that even a
// coarse file system sees a change.
func editInPlace(t *testing.T, path, old, new string) {
	t.Helper()
	if len(old) != len(new) {
		t.Fatalf("not a same-size edit: %d and %d bytes", len(old), len(new))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), old)
	if i < 0 {
		t.Fatalf("%q not in %s", old, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(new), int64(i)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
}

// TestSameSizeEditOfAMiddleLine: an edit in place that changes neither the
// size, nor the header, nor the last line is noticed by its new mtime: the
// file is read again and the changed line is published as a new line (as
// any rewrite is), while the daemon runs and across a restart.
func TestSameSizeEditOfAMiddleLine(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	path := filepath.Join(root, "--p--", "edit.jsonl")
	e1, e2, e3 := entry("e1", "", "first"), entry("e2", "e1", "second"), entry("e3", "e2", "third")
	writeFile(t, path, header("edit")+"\n"+e1+"\n"+e2+"\n"+e3+"\n")
	n := startNode(t, root, state)
	n.waitLines("edit", []string{header("edit"), e1, e2, e3})

	e2b := entry("e2", "e1", "SECOND")
	editInPlace(t, path, e2, e2b)
	n.waitLines("edit", []string{header("edit"), e1, e2, e3, e2b})
	waitFor(t, 10*time.Second, func() (bool, string) {
		c := n.tailer.Stats().Collisions
		return c == 1, fmt.Sprintf("collisions %d, want 1 (e2 held by two lines)", c)
	})
	// Appends after it are published as usual.
	e4 := entry("e4", "e3", "fourth")
	appendFile(t, path, e4+"\n")
	n.waitLines("edit", []string{header("edit"), e1, e2, e3, e2b, e4})

	// The same while the daemon is down: the resume hint must not skip
	// over a file modified after its last line was stored.
	n.stop()
	e1b := entry("e1", "", "FIRST")
	editInPlace(t, path, e1, e1b)
	n = startNode(t, root, state)
	n.waitLines("edit", []string{header("edit"), e1, e2, e3, e2b, e4, e1b})

	// ... and with its mtime set back after the edit (rsync --inplace
	// -t, a restore from a backup): the change time, which no one sets
	// back, says the file changed. Before, the edit was never published
	// (a disk probe, 2026-12-07).
	e5 := entry("e5", "e4", "fifth") // the last line stored is the file's last
	appendFile(t, path, e5+"\n")
	n.waitLines("edit", []string{header("edit"), e1, e2, e3, e2b, e4, e1b, e5})
	n.stop()
	e3b := entry("e3", "e2", "THIRD")
	editInPlace(t, path, e3, e3b)
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, root, state)
	n.waitLines("edit", []string{header("edit"), e1, e2, e3, e2b, e4, e1b, e5, e3b})

	// A touch without a change publishes nothing.
	<-n.tailer.Ready()
	later := time.Now().Add(4 * time.Second)
	os.Chtimes(path, later, later)
	r0 := n.tailer.Stats().Rescans
	waitFor(t, 10*time.Second, func() (bool, string) { return n.tailer.Stats().Rescans >= r0+3, "rescans" })
	if got := n.lines("edit"); len(got) != 9 {
		t.Fatalf("a touch published lines: %q", clip(got))
	}
	if st := n.tailer.Stats(); st.LastError != "" {
		t.Fatalf("last error %q", st.LastError)
	}
}

// TestUnchangedFileResumesAfterRestart: a file not modified since its last
// line was stored is not read whole at a restart (the resume hint): the
// first read buffer (256 KiB), the check windows and its last line are.
func TestUnchangedFileResumesAfterRestart(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	path := filepath.Join(root, "--p--", "still.jsonl")
	var want []string
	var b strings.Builder
	want = append(want, header("still"))
	b.WriteString(header("still") + "\n")
	parent := ""
	for i := range 1000 {
		id := fmt.Sprintf("e%d", i)
		want = append(want, piLine(id, parent, 4096))
		b.WriteString(want[len(want)-1] + "\n")
		parent = id
	}
	writeFile(t, path, b.String())
	// Let the file's mtime fall behind the store's clock.
	old := time.Now().Add(-time.Minute)
	os.Chtimes(path, old, old)
	n := startNode(t, root, state)
	n.waitLines("still", want)
	n.stop()
	n = startNode(t, root, state)
	<-n.tailer.Ready()
	if st := n.tailer.Stats(); st.BytesRead > 512<<10 || st.LinesPublished != 0 {
		t.Fatalf("restart over an unchanged %d-byte file read %d bytes and published %d lines", b.Len(), st.BytesRead, st.LinesPublished)
	}
}

// TestIdenticalLinesAreOneEntry: a line's identity is its session and its
// bytes (sha-256), so a byte-identical line written again in the same
// session, in the same write or later, is the same entry: 4 lines, 3
// events.
func TestIdenticalLinesAreOneEntry(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "--p--", "twice.jsonl")
	a, b := entry("a", "", "same"), entry("b", "a", "other")
	writeFile(t, path, header("twice")+"\n"+a+"\n"+b+"\n"+a+"\n")
	n := startNode(t, root, t.TempDir())
	n.waitLines("twice", []string{header("twice"), a, b})
	appendFile(t, path, b+"\n")
	c := entry("c", "b", "after")
	appendFile(t, path, c+"\n")
	n.waitLines("twice", []string{header("twice"), a, b, c})
	if st := n.tailer.Stats(); st.LinesPublished != 4 || st.Collisions != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestEditInPlaceCountsMalformedOnce: a file read again after an edit in
// place does not count its malformed line again (it went 1, 2, 5 over three
// edits), while a new malformed line appended still counts.
func TestEditInPlaceCountsMalformedOnce(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	path := filepath.Join(root, "--p--", "bad.jsonl")
	e1 := entry("e1", "", "a")
	writeFile(t, path, header("bad")+"\ngarbage\n"+e1+"\n")
	n := startNode(t, root, state)
	n.waitLines("bad", []string{header("bad"), e1})
	malformed := func(want int64) {
		t.Helper()
		waitFor(t, 10*time.Second, func() (bool, string) {
			m := n.tailer.Stats().Malformed
			return m == want, fmt.Sprintf("malformed %d, want %d", m, want)
		})
	}
	malformed(1)
	want := []string{header("bad"), e1}
	for i, c := range []string{"b", "c", "d"} {
		prev := entry("e1", "", "abcd"[i:i+1])
		next := entry("e1", "", c)
		editInPlace(t, path, prev, next)
		want = append(want, next)
		n.waitLines("bad", want)
	}
	appendFile(t, path, "more garbage\n")
	malformed(2)
	if m := n.tailer.Stats().Malformed; m != 2 {
		t.Errorf("malformed %d after three edits and one bad line more, want 2", m)
	}
}
