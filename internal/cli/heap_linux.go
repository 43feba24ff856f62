package cli

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// hugeHeap lets the heap a one-shot `context FILE` is about to grow into,
// about n bytes, be backed by huge pages. The command's own work is small
// beside the page faults of a heap that grows from nothing: on a VM where a
// fault is dear (2026-12-05: about 15 µs a page), the 1,900 faults of a
// 6 MB file were most of its 37 ms, and with its heap in 2 MiB pages it
// took 27-30 ms (docs/PERFORMANCE.md, "One shot in huge pages").
//
// The runtime maps heap memory as it grows, and a mapping it makes later
// would not carry the advice, so the room is made now: one allocation of
// n bytes makes the runtime map it, the advice is given to its pages, and
// a collection frees them for the scan's allocations to reuse (the
// collector is off for the rest of the command). Where the system gives
// no huge pages (transparent huge pages off), the advice does nothing and
// the cost is the one collection of an empty heap.
func hugeHeap(n int) {
	room := make([]byte, n)
	unix.Madvise(room, unix.MADV_HUGEPAGE) // best effort
	room = nil
	runtime.GC()
}
