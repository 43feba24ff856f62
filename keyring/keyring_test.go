package keyring

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSaveLoadRotate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := New(now)
	first := r.CurrentKey()
	path := filepath.Join(t.TempDir(), "state", FileName)
	if err := Save(path, r); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	k := r.Rotate(now.Add(time.Hour))
	if k.ID == first.ID || r.CurrentKey().ID != k.ID {
		t.Fatalf("rotate: current %s, new %s, first %s", r.Current, k.ID, first.ID)
	}
	if err := Save(path, r); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Current != k.ID || len(got.Keys) != 2 || got.Team != r.Team {
		t.Fatalf("loaded %+v", got)
	}
	if _, ok := got.Key(first.ID); !ok {
		t.Fatal("the old key is gone after rotation")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("a 0644 keyring loaded: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none")); !errors.Is(err, ErrNoKeyring) {
		t.Fatalf("missing: %v", err)
	}
	// A folder (PISYNC_KEY_FILE=/tmp) is not a file; "chmod 600 it"
	// advised closing /tmp.
	if _, err := Load(os.TempDir()); err == nil || !strings.Contains(err.Error(), "is not a file") || strings.Contains(err.Error(), "chmod") {
		t.Fatalf("a folder: %v", err)
	}
}

func TestExportImport(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := New(now)
	r.Rotate(now.Add(time.Minute))
	text := Export(r)
	got, err := Import(text)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, text)
	}
	if got.Team != r.Team || got.Current != r.Current || len(got.Keys) != 2 || string(got.IDKey) != string(r.IDKey) {
		t.Fatalf("round trip: %+v, want %+v", got, r)
	}
	// Case, white space and the marker lines do not matter.
	body := strings.TrimPrefix(strings.TrimSuffix(strings.TrimSpace(text), exportEnd), exportBegin)
	if _, err := Import(strings.ToLower(strings.ReplaceAll(body, "\n", " "))); err != nil {
		t.Fatalf("lower case, one line: %v", err)
	}
	// Every one-character typo is caught.
	lines := strings.Split(text, "\n")
	row := []byte(lines[1])
	for i, c := range row {
		if c == '-' {
			continue
		}
		typo := append([]byte(nil), row...)
		typo[i] = map[bool]byte{true: 'B', false: 'A'}[c == 'A']
		lines2 := append([]string(nil), lines...)
		lines2[1] = string(typo)
		if _, err := Import(strings.Join(lines2, "\n")); !errors.Is(err, ErrBadExport) {
			t.Fatalf("typo at %d accepted: %v", i, err)
		}
	}
	if _, err := Import(strings.Join(append(lines[:2:2], lines[3:]...), "\n")); !errors.Is(err, ErrBadExport) {
		t.Fatalf("a missing line accepted: %v", err)
	}
	if _, err := Import(""); !errors.Is(err, ErrBadExport) {
		t.Fatalf("empty accepted: %v", err)
	}
}

func TestMerge(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := New(now)
	b, err := Import(Export(a))
	if err != nil {
		t.Fatal(err)
	}
	k := a.Rotate(now.Add(time.Hour))
	changed, err := b.Merge(a, now.Add(time.Hour))
	if err != nil || !changed || b.Current != k.ID || len(b.Keys) != 2 {
		t.Fatalf("merge: changed %v err %v current %s keys %d", changed, err, b.Current, len(b.Keys))
	}
	if changed, err := b.Merge(a, now.Add(time.Hour)); err != nil || changed {
		t.Fatalf("merge again: changed %v err %v", changed, err)
	}
	if _, err := b.Merge(New(now), now); err == nil {
		t.Fatal("another team's key merged")
	} else if !strings.Contains(err.Error(), "pisyncd key export") {
		// Its advice must keep this team's keys, not only move them away:
		// the lines this machine sealed need them.
		t.Errorf("the refusal does not say to keep this team's keys first: %v", err)
	}
}

// TestMostKeys: a keyring of MaxKeys keys exports and imports whole; one
// of more is refused where it would be made (rotate, merge) and read, as
// its export could not carry it (before, key export wrote a block that
// key import refused, its count wrapped to 0).
func TestMostKeys(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := New(now)
	for i := 1; i < MaxKeys; i++ {
		r.Rotate(now.Add(time.Duration(i) * time.Second))
	}
	got, err := Import(Export(r))
	if err != nil || len(got.Keys) != MaxKeys || got.Current != r.Current {
		t.Fatalf("%d keys through an export: %v", MaxKeys, err)
	}
	more := New(now)
	more.Team, more.IDKey = r.Team, r.IDKey
	k := more.Rotate(now.Add(time.Hour))
	more.Keys = []Key{k}
	more.Current = k.ID
	if _, err := got.Merge(more, now.Add(time.Hour)); err == nil {
		t.Error("a merge past MaxKeys accepted")
	}
	r.Rotate(now.Add(time.Hour))
	if err := r.Check(); err == nil {
		t.Error("a keyring of more than MaxKeys keys passes Check")
	}
}

// TestMergeRevocationWithAClockAhead replays what a probe found: the
// current key after an import was the one made latest by its maker's clock,
// which travels in the export block. A laptop whose clock ran a day ahead
// rotated; bob imported its block; the laptop was lost, and ann rotated to
// lock it out. Before, bob kept sealing with the laptop's key after
// importing ann's block, as did ann after a stale block of the laptop's.
// Proves that a rotation the importer's current key came before wins
// whatever the clocks say, and that between two rotations made unaware of
// each other a key dated ahead of the importer's clock does not.
func TestMergeRevocationWithAClockAhead(t *testing.T) {
	now := time.Date(2026, 12, 6, 23, 30, 0, 0, time.UTC)
	ann := New(now.Add(-time.Hour))
	copyOf := func(r *Ring) *Ring {
		t.Helper()
		c, err := Import(Export(r))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	bob, laptop := copyOf(ann), copyOf(ann)
	stale := copyOf(laptop) // the laptop's block before it rotated
	kl := laptop.Rotate(now.Add(24 * time.Hour))
	if _, err := bob.Merge(copyOf(laptop), now); err != nil || bob.Current != kl.ID {
		t.Fatalf("bob after the laptop's rotation: current %s (%v), want the laptop's %s", bob.Current, err, kl.ID)
	}

	ka := ann.Rotate(now.Add(time.Minute)) // ann never had the laptop's key
	if _, err := bob.Merge(copyOf(ann), now.Add(2*time.Minute)); err != nil || bob.Current != ka.ID {
		t.Errorf("bob after ann's revoking rotation: current %s (%v), want ann's %s", bob.Current, err, ka.ID)
	}
	if _, err := ann.Merge(copyOf(laptop), now.Add(3*time.Minute)); err != nil || ann.Current != ka.ID {
		t.Errorf("ann after a block of the lost laptop: current %s (%v), want her own %s", ann.Current, err, ka.ID)
	}
	// A block older than what this machine has changes nothing.
	if changed, err := bob.Merge(stale, now.Add(4*time.Minute)); err != nil || changed || bob.Current != ka.ID {
		t.Errorf("bob after a stale block: changed %v current %s (%v)", changed, bob.Current, err)
	}
	// Two honest rotations unaware of each other: the later one wins on
	// both machines.
	c1, c2 := copyOf(ann), copyOf(ann)
	c1.Rotate(now.Add(5 * time.Minute))
	k2 := c2.Rotate(now.Add(6 * time.Minute))
	if _, err := c1.Merge(copyOf(c2), now.Add(7*time.Minute)); err != nil || c1.Current != k2.ID {
		t.Errorf("the earlier rotation after the later's block: current %s (%v), want %s", c1.Current, err, k2.ID)
	}
	if _, err := c2.Merge(copyOf(c1), now.Add(7*time.Minute)); err != nil || c2.Current != k2.ID {
		t.Errorf("the later rotation after the earlier's block: current %s (%v), want %s", c2.Current, err, k2.ID)
	}
}
