//go:build !linux

package search

// dropResident leaves the pages as they are: the resident-set bound is
// measured and kept on Linux.
func dropResident(b []byte) {}
