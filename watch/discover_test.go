package watch

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// TestWalkKeepsItsPaths: a walk that reads a folder again (a full walk, or
// the folder changed) keeps the strings the walk before kept for the paths
// it finds again, in its set of paths and its record of the folder, not the
// fresh ones it made: otherwise every walk makes each path a long-lived
// string anew.
func TestWalkKeepsItsPaths(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "--proj--")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.jsonl", "b.jsonl"} {
		writeFile(t, filepath.Join(dir, name), header(name))
	}
	d, err := newDiscovery(New(nil, Options{Root: root}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.w.Close()
	if err := d.walk(); err != nil {
		t.Fatal(err)
	}
	first := map[string]*byte{}
	for p, kept := range d.seen {
		first[p] = unsafe.StringData(kept)
	}
	if len(first) != 2 {
		t.Fatalf("first walk found %v", d.seen)
	}
	check := func(when string) {
		t.Helper()
		for p, kept := range d.seen {
			if want, ok := first[p]; ok && unsafe.StringData(kept) != want {
				t.Errorf("%s: the walk keeps a new string for %s", when, p)
			}
		}
		for _, p := range d.dirs[dir].files {
			if want, ok := first[p]; ok && unsafe.StringData(p) != want {
				t.Errorf("%s: the folder's record holds a new string for %s", when, p)
			}
		}
	}
	d.walks = statEvery // the next walk is a full one: it reads every folder
	if err := d.walk(); err != nil {
		t.Fatal(err)
	}
	if len(d.seen) != 2 || len(d.dirs[dir].files) != 2 {
		t.Fatalf("full walk found %v, folder %v", d.seen, d.dirs[dir].files)
	}
	check("full walk")
	writeFile(t, filepath.Join(dir, "c.jsonl"), header("c")) // the folder changes: read again
	if err := d.walk(); err != nil {
		t.Fatal(err)
	}
	if len(d.seen) != 3 || len(d.dirs[dir].files) != 3 {
		t.Fatalf("walk after a new file found %v, folder %v", d.seen, d.dirs[dir].files)
	}
	check("walk of a changed folder")
}
