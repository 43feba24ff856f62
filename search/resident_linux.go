package search

import "golang.org/x/sys/unix"

// dropResident drops the resident pages of a read-only file mapping from
// this process's page tables; the next read maps them again from the page
// cache. An error leaves them resident, which costs memory, not
// correctness.
func dropResident(b []byte) {
	if len(b) == 0 {
		return
	}
	_ = unix.Madvise(b, unix.MADV_DONTNEED)
}
