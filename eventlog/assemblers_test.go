package eventlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestAssemblersHoldOnlySplitLines: lines of many subjects come whole, and
// one split into chunks comes interleaved with them; each is returned
// whole and right, an assembler is held only while the split line waits
// for chunks, and PendingStart is its first chunk's sequence meanwhile.
func TestAssemblersHoldOnlySplitLines(t *testing.T) {
	as := NewAssemblers(false)
	big := NewLine(bytes.Repeat([]byte("b"), 2*MaxChunk+10), "big", "", "message", "f.jsonl", 1)
	bigSubj := LocalSubject("n1", "split")
	chunks := big.messages(bigSubj)
	if len(chunks) != 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	seq := uint64(0)
	whole := func(i int) {
		t.Helper()
		raw := fmt.Appendf(nil, `{"type":"message","id":"w%d"}`, i)
		l := NewLine(raw, fmt.Sprintf("w%d", i), "", "message", "f.jsonl", 1)
		subj := LocalSubject("n1", fmt.Sprintf("s%d", i))
		m := l.messages(subj)[0]
		seq++
		ev, err := as.Add(LocalStream, subj, seq, m.Header, m.Data)
		if err != nil || ev == nil || !bytes.Equal(ev.Raw, raw) || ev.Seq != seq {
			t.Fatalf("whole line %d: %+v, %v", i, ev, err)
		}
	}
	for i := range 100 {
		whole(i)
	}
	if len(as.held) != 0 || as.PendingStart() != 0 {
		t.Fatalf("after whole lines: %d held, pending from %d", len(as.held), as.PendingStart())
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
			if ev != nil || len(as.held) != 1 || as.PendingStart() != first {
				t.Fatalf("chunk %d: event %v, %d held, pending from %d (want %d)", c+1, ev != nil, len(as.held), as.PendingStart(), first)
			}
			whole(100 + c) // other subjects meanwhile
			continue
		}
		if ev == nil || !bytes.Equal(ev.Raw, big.Raw) || ev.Seq != seq {
			t.Fatalf("split line: %v", ev)
		}
	}
	if len(as.held) != 0 || as.PendingStart() != 0 {
		t.Fatalf("after the split line: %d held, pending from %d", len(as.held), as.PendingStart())
	}
	// A chunk without its start is an error, as with one assembler.
	seq++
	if _, err := as.Add(LocalStream, bigSubj, seq, chunks[1].Header, chunks[1].Data); err == nil {
		t.Fatal("a middle chunk alone was taken")
	}
	whole(200)
}

// FuzzAssemblers: whatever messages come on a few subjects (chunk headers
// true, false or missing, payloads of any size), Assemblers never panics,
// every line it returns matches its sha, holds an assembler only for a
// subject with a split line pending, and agrees with one Assembler per
// subject (what the readers kept before).
func FuzzAssemblers(f *testing.F) {
	f.Add([]byte{0, 1, 1, 'a', 1, 1, 3, 'b', 1, 2, 3, 'c', 0, 3, 3, 'd'})
	f.Add([]byte{2, 2, 3, 'x', 2, 1, 1, 'y'})
	f.Fuzz(func(t *testing.T, in []byte) {
		as, one := NewAssemblers(false), map[string]*Assembler{}
		var seq uint64
		for len(in) >= 4 {
			subj := LocalSubject("n1", fmt.Sprintf("s%d", in[0]%3))
			i, n, data := int(in[1]%4), int(in[2]%4), bytes.Repeat(in[3:4], int(in[3]%7))
			in = in[4:]
			h := nats.Header{}
			h.Set(HdrID, "x")
			h.Set(HdrType, "message")
			sum := sha256.Sum256(data)
			if len(data) == 0 || data[0]%2 == 0 {
				h.Set(HdrSha, hex.EncodeToString(sum[:]))
			} else {
				h.Set(HdrSha, hex.EncodeToString(make([]byte, 32)))
			}
			if n > 1 || i > 1 {
				h.Set(HdrChunk, strconv.Itoa(i)+"/"+strconv.Itoa(n))
			}
			seq++
			ev, err := as.Add(LocalStream, subj, seq, h, data)
			a := one[subj]
			if a == nil {
				a = NewAssembler(false)
				one[subj] = a
			}
			want, werr := a.Add(LocalStream, subj, seq, h, data)
			if (err == nil) != (werr == nil) || (ev == nil) != (want == nil) {
				t.Fatalf("seq %d: got %v, %v; one assembler a subject: %v, %v", seq, ev, err, want, werr)
			}
			if ev != nil && (!bytes.Equal(ev.Raw, want.Raw) || sha256.Sum256(ev.Raw) != ev.Sha) {
				t.Fatalf("seq %d: line %q, want %q", seq, ev.Raw, want.Raw)
			}
			pending := 0
			var first uint64
			for _, a := range one {
				if s := a.PendingStart(); s > 0 {
					pending++
					if first == 0 || s < first {
						first = s
					}
				}
			}
			if len(as.held) != pending || as.PendingStart() != first {
				t.Fatalf("seq %d: %d held from %d, want %d from %d", seq, len(as.held), as.PendingStart(), pending, first)
			}
		}
	})
}
