//go:build !linux

package cli

// hugeHeap does nothing: only Linux takes advice on huge pages for
// anonymous memory (madvise MADV_HUGEPAGE).
func hugeHeap(int) {}
