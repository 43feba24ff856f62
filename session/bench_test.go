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

// TestLoadPipelined: Load of an input large enough for two goroutines
// (loadPipelined) builds what one goroutine builds (loadLines), with
// lines pi skips among the entries, with and without a '\n' at the end;
// and it stops at the same error.
func TestLoadPipelined(t *testing.T) {
	base := synthSession(12000)
	var b bytes.Buffer
	for i, l := range bytes.Split(base, []byte{'\n'}) {
		b.Write(l)
		b.WriteByte('\n')
		switch i % 997 {
		case 5:
			b.WriteString("{\"type\":\"message\",\"id\":\"broken\"\n") // malformed: skipped
		case 7:
			b.WriteString("\n  \n0\n") // blank and falsy: skipped
		}
	}
	b.WriteString(`{"type":"message","id":"last","parentId":"00002ee0","timestamp":"2025-03-01T10:00:01.000Z","message":{"role":"user","content":"no newline"}}`)
	data := b.Bytes()
	if len(data) < 2*pipelineMin {
		t.Fatalf("input of %d bytes: too small to be pipelined", len(data))
	}
	// As written, and cut after its last '\n' (the ring's last run empty
	// or short).
	for _, data := range [][]byte{data, data[:bytes.LastIndexByte(data, '\n')+1]} {
		one := &File{Tree: NewTree()}
		if err := one.loadLines(data); err != nil {
			t.Fatal(err)
		}
		two := &File{Tree: NewTree()}
		if err := two.loadPipelined(data); err != nil {
			t.Fatal(err)
		}
		if len(one.lines) != len(two.lines) || one.Tree.Len() != two.Tree.Len() || one.Tree.Stats != two.Tree.Stats {
			t.Fatalf("pipelined: %d lines, %d entries, %+v; one goroutine: %d, %d, %+v",
				len(two.lines), two.Tree.Len(), two.Tree.Stats, len(one.lines), one.Tree.Len(), one.Tree.Stats)
		}
		for i := range one.lines {
			if !bytes.Equal(one.lines[i], two.lines[i]) {
				t.Fatalf("line %d differs", i)
			}
		}
		c1, err1 := ContextJSON(one, nil)
		c2, err2 := ContextJSON(two, nil)
		if err1 != nil || err2 != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("contexts differ (%v, %v)", err1, err2)
		}
	}
	// A version-1 file whose first entry is a number: pi's migration throws,
	// and both stop with the same error.
	bad := append([]byte(`{"type":"session","id":"x","timestamp":"2025-03-01T10:00:00.000Z","cwd":"/x"}`+"\n7\n"), data[bytes.IndexByte(data, '\n')+1:]...)
	e1 := (&File{Tree: NewTree()}).loadLines(bad)
	e2 := (&File{Tree: NewTree()}).loadPipelined(bad)
	if e1 == nil || e2 == nil || e1.Error() != e2.Error() {
		t.Fatalf("errors: one goroutine %v, pipelined %v", e1, e2)
	}
}

// BenchmarkLoad10k: Load of a 10k-entry session (a whole file in memory:
// every line validated, the tree built), as `pisyncd context FILE` reads
// a file of up to 32 MiB.
func BenchmarkLoad10k(b *testing.B) {
	data := synthSession(10000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLoadNoStats: LoadOptions.NoStats leaves the usage totals at zero
// and changes nothing else: the same entries and the same context, bodies
// included.
func TestLoadNoStats(t *testing.T) {
	data := synthSession(3000)
	with, err := LoadWith(data, LoadOptions{Rules: RulesAuto})
	if err != nil {
		t.Fatal(err)
	}
	without, err := LoadWith(data, LoadOptions{Rules: RulesAuto, NoStats: true})
	if err != nil {
		t.Fatal(err)
	}
	if with.Tree.TotalTokens == 0 || with.Tree.TotalCost == 0 {
		t.Fatalf("with stats: %+v, want the usage totals", with.Tree.Stats)
	}
	if without.Tree.TotalTokens != 0 || without.Tree.TotalCost != 0 || without.Tree.MessageCount != with.Tree.MessageCount {
		t.Fatalf("NoStats: %+v (with: %+v), want no usage totals and the same message count", without.Tree.Stats, with.Tree.Stats)
	}
	c1, err1 := ContextJSON(with, nil)
	c2, err2 := ContextJSON(without, nil)
	if err1 != nil || err2 != nil || !bytes.Equal(c1, c2) || with.Tree.Len() != without.Tree.Len() {
		t.Fatalf("contexts differ (%v, %v)", err1, err2)
	}
}
