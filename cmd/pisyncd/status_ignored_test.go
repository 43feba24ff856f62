package main

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/replicate"
)

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

// TestRejectedFromText: the row of an origin's rejected events reads as
// the ignored files' row, where it printed Go's "3 map[unsealed:3]".
func TestRejectedFromText(t *testing.T) {
	st := &Status{Forwarder: &eventlog.ForwarderStats{}, Downloader: &eventlog.DownloaderStats{}, Replicator: &replicate.Stats{}, Admission: &admit.Stats{Rejected: 3, ByOrigin: map[string]admit.OriginStats{
		"carol": {Rejected: 3, ByReason: map[admit.Reason]int64{"unsealed": 2, "no-authority": 1}},
	}}}
	var b bytes.Buffer
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\n  rejected from carol +3 \(no-authority 1, unsealed 2\)\n`).MatchString(b.String()) {
		t.Errorf("status:\n%s", b.String())
	}
}
