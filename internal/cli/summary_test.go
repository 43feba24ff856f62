package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestSummaryCounts: the summary's first line counts in words that agree
// with the count (before: "1 messages").
func TestSummaryCounts(t *testing.T) {
	for _, c := range []struct {
		entries, messages int
		want              string
	}{
		{1, 1, "leaf a1, 1 entry in the window, 1 message, model"},
		{3, 2, "leaf a1, 3 entries in the window, 2 messages, model"},
		{0, 0, "leaf a1, 0 entries in the window, 0 messages, model"},
	} {
		s := Summary{Leaf: "a1", Entries: c.entries, Lines: make([]string, c.messages)}
		var b bytes.Buffer
		if err := s.Print(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(b.String(), c.want) {
			t.Errorf("%d entries, %d messages: %q, want it to start %q", c.entries, c.messages, b.String(), c.want)
		}
	}
}
