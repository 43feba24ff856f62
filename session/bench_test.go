package session

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// synthSession writes a linear session of n entries with a compaction every
// 1000 entries.
func synthSession(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"session","version":3,"id":"bench","timestamp":"2025-03-01T10:00:00.000Z","cwd":"/x"}` + "\n")
	parent := "null"
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%08x", i+1)
		switch {
		case i > 0 && i%1000 == 0:
			fmt.Fprintf(&b, `{"type":"compaction","id":"%s","parentId":%s,"timestamp":"2025-03-01T10:00:01.000Z","summary":"s","firstKeptEntryId":"%08x","tokensBefore":1000}`+"\n", id, parent, i-50)
		case i%2 == 0:
			fmt.Fprintf(&b, `{"type":"message","id":"%s","parentId":%s,"timestamp":"2025-03-01T10:00:01.000Z","message":{"role":"user","content":"question %d with some text","timestamp":1740823201000}}`+"\n", id, parent, i)
		default:
			fmt.Fprintf(&b, `{"type":"message","id":"%s","parentId":%s,"timestamp":"2025-03-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"answer %d"}],"provider":"anthropic","model":"m","usage":{"totalTokens":10,"cost":{"total":0.001}},"stopReason":"stop","timestamp":1740823202000}}`+"\n", id, parent, i)
		}
		parent = `"` + id + `"`
	}
	return b.Bytes()
}

// BenchmarkContext10k builds the context of a 10k-entry session at its
// leaf from scratch (path walk, window, bodies).
func BenchmarkContext10k(b *testing.B) {
	f, err := Load(synthSession(10000))
	if err != nil {
		b.Fatal(err)
	}
	leaf, _ := f.Tree.Leaf().String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.ContextAt(&leaf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend measures the incremental update per appended entry.
func BenchmarkAppend(b *testing.B) {
	raw := synthSession(10000)
	lines := bytes.Split(raw, []byte{'\n'})
	parsed := make([]Line, len(lines))
	for i, l := range lines {
		parsed[i] = ParseLine(l)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		tr := NewTree()
		for i := range parsed {
			if n >= b.N {
				break
			}
			if err := tr.Append(parsed[i], Ref(i)); err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
}

// BenchmarkContextLinear10k renders a 10k-entry session without
// compaction (every entry in the window, ≈300-byte lines), the shape of
// projection's BenchmarkContext10k, from the file in memory.
func BenchmarkContextLinear10k(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"type":"session","version":3,"id":"bench","timestamp":"2025-03-01T10:00:00.000Z","cwd":"/x"}` + "\n")
	parent := "null"
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("e%07d", i)
		fmt.Fprintf(&buf, `{"type":"message","id":"%s","parentId":%s,"timestamp":"2026-11-29T23:08:17.000Z","message":{"role":"user","content":"message %d %s","timestamp":1}}`+"\n", id, parent, i, bytes.Repeat([]byte("x"), 200))
		parent = `"` + id + `"`
	}
	f, err := Load(buf.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Context(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadDeepArrayTimestamp loads an entry whose timestamp is 100,000
// arrays deep (seed 23 file 301 of the differential run has one): joining
// it level by level took a minute and a half, one pass takes milliseconds.
func BenchmarkLoadDeepArrayTimestamp(b *testing.B) {
	raw := []byte(`{"type":"session","version":3,"id":"bench","timestamp":"2025-03-01T10:00:00.000Z","cwd":"/x"}` + "\n" +
		`{"type":"message","id":"a","parentId":null,"timestamp":` + strings.Repeat("[", 100000) + "1" + strings.Repeat("]", 100000) +
		`,"message":{"role":"user","content":"q","timestamp":1}}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(raw); err != nil {
			b.Fatal(err)
		}
	}
}
