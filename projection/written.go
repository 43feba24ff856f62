package projection

// A session's values, by slot: the four fixed views, then the context
// pages in order. The worker keeps the hash of what it last wrote to each
// (writtenHashes), so an unchanged value is not written again.
const (
	slotCat = iota
	slotCtx
	slotLeaf
	slotHeads
	slotPage0 // page n is slotPage0 + n
)

// writtenHashes is the hash of the value last written to each slot; zero
// for none (a value whose hash happens to be zero is written again at
// every flush, which costs a write and is otherwise harmless).
//
// It was a map from key to hash: with 10,000 sessions held, the map and
// its key strings were about 600 bytes a session, most of the
// projection's memory once the trees are evicted. A slice indexed by
// slot is 8 bytes a value and holds no key.
type writtenHashes []uint64

func (w writtenHashes) get(slot int) uint64 {
	if slot < len(w) {
		return w[slot]
	}
	return 0
}

func (w *writtenHashes) set(slot int, h uint64) {
	if slot >= len(*w) {
		// Grown to the slot exactly: most sessions have a page or two,
		// and a growing one adds a page at a time.
		*w = append(*w, make([]uint64, slot+1-len(*w))...)
	}
	(*w)[slot] = h
}

func (w *writtenHashes) forget(slot int) {
	if slot < len(*w) {
		(*w)[slot] = 0
	}
	// A page past the end is dropped from the tail, so the slice shrinks
	// with the window.
	for len(*w) > slotPage0 && (*w)[len(*w)-1] == 0 {
		*w = (*w)[:len(*w)-1]
	}
}
