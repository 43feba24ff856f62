package watch

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// TestStatSig: the walk's stat compares equal to the worker's record of
// the same file (settled.go compares the two), and it changes with the file.
func TestStatSig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat() // as the worker takes it
	if err != nil {
		t.Fatal(err)
	}
	sig, err := statSig(path)
	if err != nil {
		t.Fatal(err)
	}
	if sig != sigOf(st) {
		t.Fatalf("statSig %+v, the worker's %+v", sig, sigOf(st))
	}
	if err := os.WriteFile(path, []byte("{}\n{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if again, _ := statSig(path); again == sig {
		t.Errorf("statSig unchanged after a write: %+v", again)
	}
	if _, err := statSig(path + ".gone"); !os.IsNotExist(err) {
		t.Errorf("statSig of a missing file: %v", err)
	}
}

// TestClaimHeldAllocates: a full walk claims every file again, once a
// minute; for a file it holds already that takes its stat and nothing
// more (os.Stat's FileInfo and a fresh key in two maps were a third of an
// idle daemon's garbage with 10,000 sessions).
func TestClaimHeldAllocates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &discovery{owner: map[fileKey]string{}, keyOf: map[string]fileKey{}, dups: map[string]struct{}{}}
	if ok, _, err := d.claimStat(path); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	walked := string([]byte(path)) // the next walk's copy of the path
	// AllocsPerRun counts every goroutine's allocations, and goroutines an
	// earlier test left stopping may still run: the least of a few counts
	// is the claim's own (CI once counted 5).
	n := testing.AllocsPerRun(100, func() { d.claimStat(walked) })
	for range 4 {
		n = min(n, testing.AllocsPerRun(100, func() { d.claimStat(walked) }))
	}
	if n > 1 {
		t.Errorf("claiming a held file allocates %v times, want at most 1 (the path for the system call)", n)
	}
	if len(d.owner) != 1 || len(d.keyOf) != 1 {
		t.Fatalf("maps after the claims: owner %v, keyOf %v", d.owner, d.keyOf)
	}
	// The first claim's path is still the one the maps hold: the walk's
	// copies are garbage at the next walk, not the maps' contents.
	for k, p := range d.owner {
		if unsafe.StringData(p) != unsafe.StringData(path) {
			t.Errorf("owner holds the walk's copy of the path")
		}
		for q := range d.keyOf {
			if unsafe.StringData(q) != unsafe.StringData(path) || d.keyOf[q] != k {
				t.Errorf("keyOf holds the walk's copy of the path, or another key")
			}
		}
	}
}
