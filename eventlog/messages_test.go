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
