package web

import "testing"

// TestSummarize: the tree's line of an entry, from the lean decode, for
// the shapes a line can take (parseBlocks' rules: a string is the text, a
// block that does not decode is left out, the first text or tool call
// wins; a field of an unexpected type keeps only the entry's type).
func TestSummarize(t *testing.T) {
	for _, c := range []struct{ line, kind, text string }{
		{`{"type":"message","message":{"role":"user","content":"hello   there"}}`, "user", "hello there"},
		{`{"type":"message","message":{"role":"assistant","content" :  [ {"type":7},{"type":"thinking","thinking":"x"},{"type":"toolCall","name":"bash"},{"type":"text","text":"late"}]}}`, "assistant", "→ bash"},
		{`{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":""},{"type":"text","text":"second"}]}}`, "assistant", "second"},
		{`{"type":"message","message":{"role":"toolResult","toolName":"read","content":[{"type":"text","text":"x"}]}}`, "toolResult", "read"},
		{`{"type":"message","message":{"role":"bashExecution","command":"ls -l"}}`, "bashExecution", "ls -l"},
		{`{"type":"message","message":"not an object"}`, "message", ""},
		{`{"type":"message","message":{"role":"user","content":{"an":"object"}}}`, "user", ""},
		{`{"type":"compaction","summary":"a\nsummary"}`, "compaction", "a summary"},
		{`{"type":"model_change","modelId":5}`, "model_change", "5"},
		{`{"type":"session_info","name":"n"}`, "session_info", "n"},
		{`{"type":"custom","customType":"c"}`, "custom", "c"},
		{`{"type":"other"}`, "other", ""},
	} {
		d, err := parseLean([]byte(c.line))
		if err != nil {
			t.Errorf("%s: %v", c.line, err)
			continue
		}
		if kind, text := summarize(d); kind != c.kind || text != c.text {
			t.Errorf("%s: %q %q, want %q %q", c.line, kind, text, c.kind, c.text)
		}
	}
	if _, err := parseLean([]byte(`{not json`)); err == nil {
		t.Error("a line that is not JSON decodes")
	}
}
