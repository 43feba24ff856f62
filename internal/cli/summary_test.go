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

// hostileText is session text that drives a terminal printed as it is: it
// sets the clipboard (OSC 52), clears the screen, renames the window, moves
// the cursor back over what was printed, and reverses the text's direction.
const hostileText = "hi \x1b]52;c;ZXZpbA==\x07 \x1b[2J\x1b]0;title\x07\r\x9b31m\u202eevil\u2028x"

// controlFree reports the first byte or rune of out that a terminal acts
// on, but for the newlines that end its lines.
func controlFree(out string) (rune, bool) {
	for _, r := range out {
		if r != '\n' && (r < 0x20 || (r >= 0x7f && r < 0xa0) || r == '\u202e' || r == '\u2028') {
			return r, false
		}
	}
	return 0, true
}

// TestSummaryIsTerminalSafe: the human form of a context (pisyncd context,
// pisync context FILE) prints no control character of the session's text,
// leaf id, model or thinking level. A teammate's session, or a page an
// agent read, wrote the clipboard and cleared the screen of whoever ran it.
func TestSummaryIsTerminalSafe(t *testing.T) {
	s := Summary{Leaf: "a1" + hostileText, Entries: 2, Model: []byte(`{"provider":"p","modelId":"m\u001b]0;x\u0007"}`), Thinking: []byte(`"high\u001b[2J"`)}
	s.Add([]byte(`{"role":"user\u001b[31m","content":"` + strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(hostileText, "\x1b", `\u001b`), "\x07", `\u0007`), "\r", `\r`), "\x9b", `\u009b`) + `"}`))
	var b bytes.Buffer
	if err := s.Print(&b); err != nil {
		t.Fatal(err)
	}
	if r, ok := controlFree(b.String()); !ok {
		t.Errorf("the summary holds %U: %q", r, b.String())
	}
	if !strings.Contains(b.String(), "evil") {
		t.Errorf("the text is gone: %q", b.String())
	}
}
