package cli

import (
	"bytes"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// hugeHeap lets the heap a one-shot `context FILE` is about to grow into,
// about n bytes, be backed by huge pages. The command's own work is small
// beside the page faults of a heap that grows from nothing: on a VM where a
// fault is dear (2026-12-05: about 15 µs a page), the 1,900 faults of a
// 6 MB file were most of its 37 ms, and with its heap in 2 MiB pages it
// took 26-30 ms (docs/PERFORMANCE.md, "One shot in huge pages").
//
// The runtime maps heap memory as it grows, and a mapping it makes later
// would not carry the advice, so the room is made now: one allocation of
// n bytes makes the runtime map it, the advice is given to its pages, and
// a collection frees them for the scan's allocations to reuse (the
// collector is off for the rest of the command).
//
// A fault on advised memory may make the kernel compact or reclaim memory
// to find a huge page, which can stall it for long (golang/go#61718, why
// the runtime no longer advises its heap), so the advice is given only
// when the kernel has free 2 MiB blocks for all of it, twice over, and
// transparent huge pages are not off.
func hugeHeap(n int) {
	if thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || bytes.Contains(thp, []byte("[never]")) {
		return
	}
	info, err := os.ReadFile("/proc/buddyinfo")
	if err != nil || freeHugeBlocks(info) < 2*(n>>21+1) {
		return
	}
	room := make([]byte, n)
	unix.Madvise(room, unix.MADV_HUGEPAGE) // best effort
	room = nil
	runtime.GC()
}

// freeHugeBlocks counts the free 2 MiB blocks of memory in info, the
// text of /proc/buddyinfo: per zone, the free blocks of each order
// (2^order pages of 4 KiB), order 9 being 2 MiB. The DMA zone, which the
// heap does not get, is left out.
func freeHugeBlocks(info []byte) int {
	total := 0
	for line := range bytes.Lines(info) {
		f := bytes.Fields(line)
		// "Node 0, zone Normal n0 n1 ... n10"
		if len(f) < 5 || string(f[2]) != "zone" || string(f[3]) == "DMA" {
			continue
		}
		for order, c := range f[4:] {
			n, err := strconv.Atoi(string(c))
			if err != nil {
				return 0 // not the format this reads: no advice
			}
			if order >= 9 {
				total += n << (order - 9)
			}
		}
	}
	return total
}
