package replicate

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPutBackCopiesALateLine: a line pi appends to its headerless file
// between the replicator's read and its rename is not lost: it follows
// the lines put back.
func TestPutBackCopiesALateLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(path, []byte("e1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	read, err := readFrom(old, 0)
	if err != nil {
		t.Fatal(err)
	}
	// pi's next line, after the read.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("e2\n")
	f.Close()

	whole := append([]byte("header\nm1\n"), read...)
	r := &Replicator{}
	if err := r.putBack(trashedCopy{path: path}, old, whole, int64(len(read))); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "header\nm1\ne1\ne2\n" {
		t.Errorf("put back:\n%s", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, stagingPrefix+"*")); len(left) != 0 {
		t.Errorf("staging left: %v", left)
	}
}

// TestSessionFilesFindsPisLinesAfterItsFileWent: erase finds, besides the
// files whose header names the session, a file without a header named
// after it: what a pi that had the session open wrote after its file went
// (an erase while pi writes). Before, the secret in it stayed, and a
// second erase said there was nothing of the session here.
func TestSessionFilesFindsPisLinesAfterItsFileWent(t *testing.T) {
	root := t.TempDir()
	sid, other := "0199eeee-0000-7000-8000-0000000000e1", "0199eeee-0000-7000-8000-0000000000e2"
	write := func(rel, text string) string {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	entry := `{"type":"message","id":"m9","parentId":"m8","timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"user","content":"secret"}}` + "\n"
	headerless := write("--p--/2026-11-30T00-00-00-000Z_"+sid+".jsonl", entry)
	write("--p--/2026-11-30T00-00-00-000Z_"+other+".jsonl", entry) // another session's
	write("--q--/2026-11-30T00-00-00-000Z_"+sid+".jsonl",          // another session's header under this name
		`{"type":"session","version":3,"id":"`+other+`","timestamp":"2026-11-30T00:00:00.000Z","cwd":"/q"}`+"\n")
	live, trash, err := SessionFiles(root, sid)
	if err != nil || len(trash) != 0 || len(live) != 1 || live[0] != headerless {
		t.Fatalf("live %v, trash %v, %v; want %s", live, trash, err, headerless)
	}
}

// TestRejoinAfterALongFirstLine: pi's first line after its file went may
// be longer than any header (an image): the copy is put back with it all
// the same. Before, such a file was taken for no line of pi's, and the
// copy stayed in the trash.
func TestRejoinAfterALongFirstLine(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "--p--", "s.jsonl")
	trash := filepath.Join(root, TrashDir, "s.jsonl")
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.MkdirAll(filepath.Dir(trash), 0o700)
	old := `{"type":"session","version":3,"id":"s","timestamp":"2026-11-30T00:00:00.000Z","cwd":"/p"}` + "\n"
	if err := os.WriteFile(trash, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	image := `{"type":"message","id":"m1","parentId":null,"timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"user","content":"` + strings.Repeat("A", 3*maxHeaderLine) + `"}}` + "\n"
	if err := os.WriteFile(path, []byte(image), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &Replicator{logger: slog.New(slog.DiscardHandler)}
	done, err := r.rejoin(trashedCopy{path: path, sid: "s", trash: trash})
	if err != nil || !done {
		t.Fatalf("rejoin: done %v, %v", done, err)
	}
	if got, _ := os.ReadFile(path); string(got) != old+image {
		t.Errorf("put back: %d bytes, want %d", len(got), len(old)+len(image))
	}
	if _, err := os.Stat(trash); !os.IsNotExist(err) {
		t.Errorf("the trashed copy is still there: %v", err)
	}
}
