package watch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/pisyncd/pisyncd/internal/testenv"
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
	d := newDiscovery(New(nil, Options{Root: root}))
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

// TestRescanFailureSaidOnce: a rescan that keeps failing the same way (the
// sessions dir no longer readable) is logged once, again when it fails
// otherwise, and once when rescans work again; before, at every rescan.
func TestRescanFailureSaidOnce(t *testing.T) {
	var logs testenv.LogBuffer
	d := newDiscovery(New(nil, Options{Root: t.TempDir(), Logger: logs.Logger()}))
	defer d.w.Close()
	denied, other := errors.New("open /s: permission denied"), errors.New("open /s: input/output error")
	for _, err := range []error{denied, denied, denied, nil, nil, denied, other, other, nil} {
		d.rescanned(err)
	}
	out := logs.String()
	if n := strings.Count(out, "rescan failed"); n != 3 {
		t.Errorf("%d failure lines for three runs of failures, want 3:\n%s", n, out)
	}
	if n := strings.Count(out, "rescans work again"); n != 2 {
		t.Errorf("%d recovery lines, want 2:\n%s", n, out)
	}
}
