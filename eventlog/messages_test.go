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

// TestHeaderForm: the form a header carries a string in (nats.go trims it
// and turns CR and LF into spaces as it writes the header), which the
// messages of a line set themselves (TestOddIDsReplicate in cmd/pisyncd
// sends such ids through a real hub).
func TestHeaderForm(t *testing.T) {
	for in, want := range map[string]string{
		"a1b2c3d4":          "a1b2c3d4",
		"x\r\nPi-Sha: evil": "x  Pi-Sha: evil",
		" padded\t":         "padded",
		"\r\n":              "",
		"in\tside":          "in\tside",
		"ünïcode ✓":         "ünïcode ✓",
	} {
		if got := HeaderForm(in); got != want {
			t.Errorf("HeaderForm(%q) = %q, want %q", in, got, want)
		}
	}
	raw := []byte(`{"type":"message","id":"x\r\ny","parentId":" p "}`)
	l := Line{Raw: raw, Sha: sha256.Sum256(raw), ID: "x\r\ny", ParentID: " p ", Type: "message"}
	h := l.messages("pi.evt.n.s")[0].Header
	if h.Get(HdrID) != "x  y" || h.Get(HdrParent) != "p" {
		t.Errorf("headers %v", h)
	}
}
