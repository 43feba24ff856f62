package eventlog

import (
	"bytes"
	"fmt"
	"testing"
)

// TestAssemblersHoldOnlySplitLines: lines of many subjects come whole, and
// one split into chunks comes interleaved with them; each is returned
// whole and right, an assembler is held only while the split line waits
// for chunks, and PendingStart is its first chunk's sequence meanwhile.
func TestAssemblersHoldOnlySplitLines(t *testing.T) {
	as := NewAssemblers(false)
	big := NewLine(bytes.Repeat([]byte("b"), 2*MaxChunk+10), "big", "", "message", "f.jsonl", 1)
	bigSubj := LocalSubject("n1", "split")
	chunks := big.messages(bigSubj, "id")
	if len(chunks) != 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	seq := uint64(0)
	whole := func(i int) {
		t.Helper()
		raw := fmt.Appendf(nil, `{"type":"message","id":"w%d"}`, i)
		l := NewLine(raw, fmt.Sprintf("w%d", i), "", "message", "f.jsonl", 1)
		subj := LocalSubject("n1", fmt.Sprintf("s%d", i))
		m := l.messages(subj, "id")[0]
		seq++
		ev, err := as.Add(LocalStream, subj, seq, m.Header, m.Data)
		if err != nil || ev == nil || !bytes.Equal(ev.Raw, raw) || ev.Seq != seq {
			t.Fatalf("whole line %d: %+v, %v", i, ev, err)
		}
	}
	for i := range 100 {
		whole(i)
	}
	if as.Held() != 0 || as.PendingStart() != 0 {
		t.Fatalf("after whole lines: %d held, pending from %d", as.Held(), as.PendingStart())
	}
	var first uint64
	for c, m := range chunks {
		seq++
		if c == 0 {
			first = seq
		}
		ev, err := as.Add(LocalStream, bigSubj, seq, m.Header, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if c < len(chunks)-1 {
			if ev != nil || as.Held() != 1 || as.PendingStart() != first {
				t.Fatalf("chunk %d: event %v, %d held, pending from %d (want %d)", c+1, ev != nil, as.Held(), as.PendingStart(), first)
			}
			whole(100 + c) // other subjects meanwhile
			continue
		}
		if ev == nil || !bytes.Equal(ev.Raw, big.Raw) || ev.Seq != seq {
			t.Fatalf("split line: %v", ev)
		}
	}
	if as.Held() != 0 || as.PendingStart() != 0 {
		t.Fatalf("after the split line: %d held, pending from %d", as.Held(), as.PendingStart())
	}
	// A chunk without its start is an error, as with one assembler.
	seq++
	if _, err := as.Add(LocalStream, bigSubj, seq, chunks[1].Header, chunks[1].Data); err == nil {
		t.Fatal("a middle chunk alone was taken")
	}
	whole(200)
}
