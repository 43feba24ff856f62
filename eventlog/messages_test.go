package eventlog

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// BenchmarkLineMessages: building a line's message as the tailer's atomic
// batches send it: its Pi-* headers and the batch's.
func BenchmarkLineMessages(b *testing.B) {
	raw := []byte(`{"type":"message","id":"a1b2c3d4","parentId":"00ff00ff","timestamp":"2026-12-02T03:00:00.000Z","message":{"role":"user","content":"` + strings.Repeat("x", 200) + `"}}`)
	l := Line{Raw: raw, Sha: sha256.Sum256(raw), ID: "a1b2c3d4", ParentID: "00ff00ff", Type: "message", File: "2026-12-02T03-00-00-000Z_0199bebe-0000-7000-8000-000000000001.jsonl", Off: 12345}
	b.ReportAllocs()
	for b.Loop() {
		msgs := l.messages("pi.evt.node.0199bebe-0000-7000-8000-000000000001")
		setBatchHeaders(msgs, "NUIDNUIDNUIDNUIDNUID12", hdrExpLastSeq, 41)
	}
}

// TestHeaderValue: a string a NATS header would not carry whole (white
// space at an end, CR, LF) goes quoted, and so does one that begins with a
// quote, so that each reads back as it was and no two meet in one form
// ("dup" and "dup ", which a trimmed form merged); any other goes as it is
// (TestOddIDsReplicate in cmd/pisyncd sends such ids through a real hub).
func TestHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"a1b2c3d4":          "a1b2c3d4",
		"":                  "",
		"in\tside":          "in\tside",
		"ünïcode ✓":         "ünïcode ✓",
		"x\r\nPi-Sha: evil": `"x\r\nPi-Sha: evil"`,
		"dup ":              `"dup "`,
		" padded\t":         `" padded\t"`,
		`"q"`:               `"\"q\""`,
		`a"b`:               `a"b`,
	} {
		got := HeaderValue(in)
		if got != want {
			t.Errorf("HeaderValue(%q) = %q, want %q", in, got, want)
		}
		if back := fromHeader(got); back != in {
			t.Errorf("fromHeader(%q) = %q, want %q", got, back, in)
		}
	}
	raw := []byte(`{"type":"message","id":"x\r\ny","parentId":" p "}`)
	l := Line{Raw: raw, Sha: sha256.Sum256(raw), ID: "x\r\ny", ParentID: " p ", Type: "message"}
	h := l.messages("pi.evt.n.s")[0].Header
	if h.Get(HdrID) != `"x\r\ny"` || h.Get(HdrParent) != `" p "` {
		t.Errorf("headers %v", h)
	}
}
