package replicate

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func writeTestFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

const (
	hdrS1 = `{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T00:00:00.000Z","cwd":"/p"}`
	entA  = `{"type":"message","id":"a","parentId":null,"message":{}}`
	entB  = `{"type":"message","id":"b","parentId":"a","message":{}}`
)

// TestReplicaNeverFollowsLinks: a link put in a replica's place is neither
// read nor written through, whatever it points at.
func TestReplicaNeverFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "bashrc")
	writeTestFile(t, outside, "export PATH=/usr/bin\n")
	p := filepath.Join(dir, "s1.jsonl")
	writeTestFile(t, p, hdrS1+"\n"+entA+"\n")
	r, err := openReplica(p, "s1")
	if err != nil {
		t.Fatal(err)
	}
	// Swapped for a link after it was read.
	os.Remove(p)
	if err := os.Symlink(outside, p); err != nil {
		t.Fatal(err)
	}
	if err := r.appendLines([][]byte{[]byte(entB)}); !errors.Is(err, ErrUnsafe) {
		t.Errorf("append through a link: %v, want ErrUnsafe", err)
	}
	if _, err := openReplica(p, "s1"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("open a link: %v, want ErrUnsafe", err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "export PATH=/usr/bin\n" {
		t.Errorf("the link's target changed: %q", b)
	}
	// A FIFO in its place is refused without blocking.
	os.Remove(p)
	if err := mkfifo(p); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	if _, err := openReplica(p, "s1"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("open a FIFO: %v, want ErrUnsafe", err)
	}
}

// TestReplicaReplacedIsReadAgain: a file put in the replica's place (pi's
// in-place rewrite) is not appended to blindly.
func TestReplicaReplacedIsReadAgain(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s1.jsonl")
	writeTestFile(t, p, hdrS1+"\n"+entA+"\n")
	r, err := openReplica(p, "s1")
	if err != nil {
		t.Fatal(err)
	}
	tmp := p + ".new"
	writeTestFile(t, tmp, hdrS1+"\n")
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if err := r.appendLines([][]byte{[]byte(entB)}); !errors.Is(err, errReplaced) {
		t.Fatalf("append to a replaced file: %v, want errReplaced", err)
	}
	if b, _ := os.ReadFile(p); string(b) != hdrS1+"\n" {
		t.Errorf("replaced file written: %q", b)
	}
	if _, err := r.refresh(); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.ids["a"]; ok || r.size != int64(len(hdrS1)+1) {
		t.Errorf("after reading again: ids %v size %d", r.ids, r.size)
	}
}

// TestReplicaCutBeforeRead: a file cut right after the replicator made it
// or appended to it, before it read the file again, is found shorter than
// written, so the lines cut off are written back (Replicator.refill).
// Before, the replica of a new file was what a read after its creation
// found: cut first, it took the cut file for all it had ever held, and a
// later line whose parent was cut off waited for it for good
// (TestTruncatedReplicaIsFilledAgain failed about once in a hundred). An
// append likewise takes the size after it only when that is the size
// before plus what it wrote; a cut or another writer in between has the
// file read again from where it was (not tested: no hook between the
// append's stat and its write).
func TestReplicaCutBeforeRead(t *testing.T) {
	cut := func(t *testing.T, path string, size int64) {
		t.Helper()
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
	}
	hdr := int64(len(hdrS1) + 1)
	t.Run("made", func(t *testing.T) {
		root := t.TempDir()
		lines := [][]byte{[]byte(hdrS1), []byte(entA), []byte(entB)}
		p, st, err := createFile(root, filepath.Join(root, "--proj--", "s1.jsonl"), lines)
		if err != nil {
			t.Fatal(err)
		}
		cut(t, p, hdr) // before the replicator looks at the file again
		r := made(p, "s1", lines, st)
		if _, err := r.refresh(); err != nil {
			t.Fatal(err)
		}
		if !r.shrunk || r.head != r.headWas || r.size != hdr {
			t.Errorf("a new file cut before a read: shrunk %v, same head %v, size %d; want shrunk, the same head, %d", r.shrunk, r.head == r.headWas, r.size, hdr)
		}
	})
	t.Run("appended", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s1.jsonl")
		writeTestFile(t, p, hdrS1+"\n")
		r, err := openReplica(p, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.appendLines([][]byte{[]byte(entA), []byte(entB)}); err != nil {
			t.Fatal(err)
		}
		if want := hdr + int64(len(entA)+len(entB)+2); r.size != want {
			t.Fatalf("after the append: size %d, want %d", r.size, want)
		}
		cut(t, p, hdr)
		if _, err := r.refresh(); err != nil {
			t.Fatal(err)
		}
		if !r.shrunk {
			t.Error("a file cut after an append, before a read: not found shorter")
		}
	})
}

func TestClosesCycle(t *testing.T) {
	r := newReplica("x", "s1")
	for _, l := range []string{entA, entB,
		`{"type":"message","id":"o2","parentId":"o1","message":{}}`, // an orphan waiting for o1
		`{"type":"message","id":"o3","parentId":"o2","message":{}}`} {
		r.add([]byte(l))
	}
	for _, c := range []struct {
		id, parent string
		want       bool
	}{
		{"c", "b", false}, {"x", "x", true}, {"o1", "o3", true}, {"o1", "b", false}, {"o1", "", false},
		{"o1", "o2", true}, {"a2", "a", false},
	} {
		if got := r.closesCycle(c.id, c.parent); got != c.want {
			t.Errorf("closesCycle(%s, %s) = %v, want %v", c.id, c.parent, got, c.want)
		}
	}
}

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o600) }

// TestReplicaOfAnotherSession: a file that holds another session's header
// is never taken for this session's replica, when it is opened and when it
// is put in the replica's place later, so no line of this session is
// appended to it (two sessions in one file, which pi reads as neither).
func TestReplicaOfAnotherSession(t *testing.T) {
	const hdrS2 = `{"type":"session","version":3,"id":"s2","timestamp":"2026-11-30T00:00:00.000Z","cwd":"/p"}`
	dir := t.TempDir()
	p := filepath.Join(dir, "s.jsonl")
	writeTestFile(t, p, hdrS2+"\n"+entA+"\n")
	if _, err := openReplica(p, "s1"); !errors.Is(err, errOtherSession) {
		t.Errorf("open s2's file as s1's: %v, want errOtherSession", err)
	}

	writeTestFile(t, p, hdrS1+"\n"+entA+"\n")
	r, err := openReplica(p, "s1")
	if err != nil {
		t.Fatal(err)
	}
	// Another session's file put in its place (a new file renamed over it).
	other := filepath.Join(dir, "other.jsonl")
	writeTestFile(t, other, hdrS2+"\n"+entA+"\n"+entB+"\n")
	if err := os.Rename(other, p); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.busy(0, time.Now()); !errors.Is(err, errOtherSession) {
		t.Errorf("busy on s2's file in s1's place: %v, want errOtherSession", err)
	}
	if err := r.appendLines([][]byte{[]byte(entB)}); err == nil {
		t.Error("appended to s2's file")
	}
	if b, _ := os.ReadFile(p); string(b) != hdrS2+"\n"+entA+"\n"+entB+"\n" {
		t.Errorf("s2's file changed: %q", b)
	}
}

// TestHeaderReadIsBounded: finding a session's files (erase, the web view's
// resume command) reads the header of every *.jsonl file in the sessions
// dir; one whose first line never ends (a sparse file, a binary named so)
// is passed over having held at most a buffer of it. It was read whole: a
// 4 GiB sparse file took the daemon past 2.4 GB from one web page.
func TestHeaderReadIsBounded(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "--p--")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "a-sparse.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(256 << 20); err != nil { // zeros, no newline
		t.Fatal(err)
	}
	big.Close()
	writeTestFile(t, filepath.Join(dir, "b.jsonl"), hdrS1+"\n")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	live, _, err := SessionFiles(root, "s1")
	runtime.ReadMemStats(&after)
	if err != nil || len(live) != 1 || filepath.Base(live[0]) != "b.jsonl" {
		t.Fatalf("SessionFiles = %v, %v; want b.jsonl", live, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("finding the files allocated %d MiB; want at most a few buffers", got>>20)
	}
}
