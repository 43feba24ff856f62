package main

import "testing"

// TestIgnoredText: the status row names each reason with its count, in a
// stable order, and is a bare count when nothing was ignored (it printed
// Go's "map[]").
func TestIgnoredText(t *testing.T) {
	for _, c := range []struct {
		n    int64
		by   map[string]int64
		want string
	}{
		{0, nil, "0"},
		{1, map[string]int64{"unreadable": 1}, "1 (unreadable 1)"},
		{3, map[string]int64{"unreadable": 1, "not-a-regular-file": 2}, "3 (not-a-regular-file 2, unreadable 1)"},
	} {
		if got := ignoredText(c.n, c.by); got != c.want {
			t.Errorf("ignoredText(%d, %v) = %q, want %q", c.n, c.by, got, c.want)
		}
	}
}
