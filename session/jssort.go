package session

// v8Sort sorts a in place the way V8's Array.prototype.sort (TimSort) does
// with a comparator that returns less(x, y) as "x - y < 0". It matters only
// for comparisons involving NaN (an unparsable timestamp), where every
// comparison is "not less" and the result depends on the algorithm: pi's
// getTree order is whatever V8 makes of it. For arrays shorter than 64
// elements V8 runs one binary insertion sort after detecting the first run,
// which this reproduces exactly. Longer arrays use TimSort's runs and merges
// without galloping, which matches V8 for every consistent comparator.
func v8Sort[T any](a []T, less func(x, y T) bool) {
	n := len(a)
	if n < 2 {
		return
	}
	minRun := minRunLength(n)
	type run struct{ base, len int }
	var runs []run
	for low := 0; low < n; {
		remaining := n - low
		runLen := countAndMakeRun(a, low, n, less)
		if runLen < minRun {
			forced := min(minRun, remaining)
			binaryInsertionSort(a, low, low+runLen, low+forced, less)
			runLen = forced
		}
		runs = append(runs, run{low, runLen})
		// Merge collapse: keep run lengths decreasing like a Fibonacci
		// sequence, as TimSort does.
		for len(runs) > 1 {
			k := len(runs) - 2
			if k > 0 && runs[k-1].len <= runs[k].len+runs[k+1].len ||
				k > 1 && runs[k-2].len <= runs[k-1].len+runs[k].len {
				if runs[k-1].len < runs[k+1].len {
					k--
				}
			} else if runs[k].len > runs[k+1].len {
				break
			}
			mergeAt(a, runs[k].base, runs[k].len, runs[k+1].len, less)
			runs[k].len += runs[k+1].len
			runs = append(runs[:k+1], runs[k+2:]...)
		}
		low += runLen
	}
	for len(runs) > 1 {
		k := len(runs) - 2
		if k > 0 && runs[k-1].len < runs[k+1].len {
			k--
		}
		mergeAt(a, runs[k].base, runs[k].len, runs[k+1].len, less)
		runs[k].len += runs[k+1].len
		runs = append(runs[:k+1], runs[k+2:]...)
	}
}

func minRunLength(n int) int {
	r := 0
	for n >= 64 {
		r |= n & 1
		n >>= 1
	}
	return n + r
}

// countAndMakeRun finds the run starting at low; a strictly descending run
// is reversed in place.
func countAndMakeRun[T any](a []T, low, high int, less func(x, y T) bool) int {
	if low+1 == high {
		return 1
	}
	runLen := 2
	desc := less(a[low+1], a[low])
	prev := a[low+1]
	for i := low + 2; i < high; i++ {
		cur := a[i]
		if desc {
			if !less(cur, prev) {
				break
			}
		} else if less(cur, prev) {
			break
		}
		prev = cur
		runLen++
	}
	if desc {
		for i, j := low, low+runLen-1; i < j; i, j = i+1, j-1 {
			a[i], a[j] = a[j], a[i]
		}
	}
	return runLen
}

func binaryInsertionSort[T any](a []T, low, start, high int, less func(x, y T) bool) {
	if low == start {
		start++
	}
	for ; start < high; start++ {
		pivot := a[start]
		left, right := low, start
		for left < right {
			mid := left + (right-left)>>1
			if less(pivot, a[mid]) {
				right = mid
			} else {
				left = mid + 1
			}
		}
		copy(a[left+1:start+1], a[left:start])
		a[left] = pivot
	}
}

// mergeAt merges the adjacent runs a[base:base+la] and a[base+la:base+la+lb].
func mergeAt[T any](a []T, base, la, lb int, less func(x, y T) bool) {
	left := append([]T(nil), a[base:base+la]...)
	i, j, k := 0, base+la, base
	end := base + la + lb
	for i < len(left) && j < end {
		if less(a[j], left[i]) {
			a[k] = a[j]
			j++
		} else {
			a[k] = left[i]
			i++
		}
		k++
	}
	for i < len(left) {
		a[k] = left[i]
		i++
		k++
	}
}
