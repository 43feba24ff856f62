package replicate

import (
	"os"
	"path/filepath"
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
