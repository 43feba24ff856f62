package projection

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// TestPagesMemoMatchesScratch: a session's context pages, hashed where
// they can be from what they were hashed from last (pageMemo), hash as
// they do from scratch after every kind of change to the window: appends
// across page boundaries, a sibling of the leaf (a window as long, another
// last entry), a branch switch, a compaction, appends again.
// And the memo is used: most appends hash only the last page.
func TestPagesMemoMatchesScratch(t *testing.T) {
	h := newByHand(t, "0199dddd-0000-7000-8000-000000000003", 3000, 10)
	w, s := h.w, h.s
	ctx := context.Background()
	reused, checked := 0, 0
	check := func(step string) {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.tree == nil {
			if err := w.ensureTree(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		k := s.keep()
		before := slices.Clone(k.pages)
		memo, _ := s.buildViews(w.viewSeed, &w.names, nil)
		for p := range min(len(before), len(k.pages)) {
			if before[p].same(k.pages[p]) {
				reused++
			}
		}
		kept := k.pages
		k.pages = nil
		scratch, _ := s.buildViews(w.viewSeed, &w.names, nil)
		k.pages = kept
		if len(memo) != len(scratch) {
			t.Fatalf("%s: %d values, %d from scratch", step, len(memo), len(scratch))
		}
		for i := range memo {
			if memo[i].key != scratch[i].key || memo[i].hash != scratch[i].hash {
				t.Fatalf("%s: value %s hashes %x, %s from scratch %x", step, memo[i].key, memo[i].hash, scratch[i].key, scratch[i].hash)
			}
		}
		checked++
	}
	apply := func(id, parent, raw string) {
		t.Helper()
		h.apply(t, id, parent, raw)
	}
	check("loaded")
	parent := "e0002999"
	appendRun := func(name string, k int) {
		for i := range k {
			id := fmt.Sprintf("%s%05d", name, i)
			apply(id, parent, entry(id, parent, "more"))
			parent = id
			check(fmt.Sprintf("%s append %d", name, i))
		}
	}
	appendRun("a", 1200) // past the second page's end (2,048 entries a page)
	// A sibling of the leaf (pi's regenerate): a window as long, its
	// last entry another.
	sibling := func(id, of string) {
		t.Helper()
		apply(id, of, entry(id, of, "again"))
		parent = id
		check("sibling " + id)
	}
	sibling("s1", "a01198")
	// A branch from an old entry: the window is a new path.
	parent = "e0001000"
	appendRun("b", 50)
	// A compaction keeping the last 100 entries of the branch's path.
	raw := fmt.Sprintf(`{"type":"compaction","id":"c1","parentId":%q,"timestamp":"2026-11-29T23:09:17.000Z","summary":"s","firstKeptEntryId":"e0000950","tokensBefore":1000}`, parent)
	apply("c1", parent, raw)
	parent = "c1"
	check("compaction")
	appendRun("d", 50)
	sibling("s2", "d00048")
	if reused < checked*9/10 {
		t.Errorf("the memo was used for %d pages over %d builds", reused, checked)
	}
}
