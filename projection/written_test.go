package projection

import "testing"

func TestWrittenHashes(t *testing.T) {
	var w writtenHashes
	if w.get(slotCat) != 0 || w.get(slotPage0+3) != 0 {
		t.Fatal("an empty record holds a hash")
	}
	w.set(slotLeaf, 7)
	w.set(slotPage0+2, 9)
	if w.get(slotLeaf) != 7 || w.get(slotPage0+2) != 9 || w.get(slotPage0+1) != 0 {
		t.Fatalf("got %v", w)
	}
	// Pages past a shrunken window are forgotten from the first one on:
	// the record shrinks back to the fixed views.
	w.forget(slotPage0 + 1)
	if len(w) != slotPage0+3 {
		t.Fatalf("forgetting a middle page shrank the record: %v", w)
	}
	w.forget(slotPage0 + 2)
	if len(w) != slotPage0 {
		t.Fatalf("trailing pages kept: %v", w)
	}
	w.forget(slotLeaf)
	if w.get(slotLeaf) != 0 || len(w) != slotPage0 {
		t.Fatalf("forgetting a fixed view: %v", w)
	}
	w.forget(slotPage0 + 40) // past the end: nothing to forget
}
