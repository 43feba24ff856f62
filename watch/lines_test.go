package watch

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// splitRef is the obviously right splitter the line reader must agree with.
func splitRef(data []byte, max int) (lines [][]byte, oversize []bool, consumed int) {
	for {
		i := bytes.IndexByte(data[consumed:], '\n')
		if i < 0 {
			return
		}
		l := data[consumed : consumed+i]
		lines = append(lines, l)
		oversize = append(oversize, len(l) > max)
		consumed += i + 1
	}
}

// countReader counts what is read through it.
type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += n
	return n, err
}

// checkReader reads data as a file that grows to each of cuts in turn (and
// to its full length last), one lineReader per look as the tailer does,
// and checks the lines against splitRef and that every byte was read once;
// then again keeping long lines within budgets of several sizes.
func checkReader(t *testing.T, data []byte, max int, cuts ...int) {
	t.Helper()
	checkReaderKeep(t, data, max, nil, cuts...)
	for _, size := range []int64{1 << 30, readBufSize + 1, 1} {
		b := newBudget(size)
		kept := checkReaderKeep(t, data, max, b, cuts...)
		if used, _, _ := b.state(); used != 0 {
			t.Fatalf("budget of %d: %d bytes still held after the lines were given back", size, used)
		}
		if size == 1<<30 && len(cuts) == 0 {
			// Read whole with room to spare: every line that does
			// not fit the buffer, within max, is kept.
			want, _, _ := splitRef(data, max)
			long := 0
			for _, l := range want {
				if len(l) >= readBufSize && len(l) <= max {
					long++
				}
			}
			if kept != long {
				t.Fatalf("%d lines kept, want the %d long ones", kept, long)
			}
		}
	}
}

// checkReaderKeep is checkReader with long lines kept within keep (nil:
// none kept). The lines' kept bytes are checked, and given back; it
// returns how many lines were kept.
func checkReaderKeep(t *testing.T, data []byte, max int, keep *budget, cuts ...int) (kept int) {
	t.Helper()
	want, wantOver, consumed := splitRef(data, max)
	var got []line
	var raws [][]byte
	var off int64
	var part partial
	read := 0
	for _, cut := range append(cuts, len(data)) {
		cut = min(cut, len(data))
		if int64(cut) < off+part.n {
			continue
		}
		r := bytes.NewReader(data[:cut])
		lr := newLineReader(nil, off, max, nil, part)
		if keep != nil {
			lr.keepLong(keep)
		}
		r.Seek(lr.off, io.SeekStart)
		cr := &countReader{r: r}
		lr.br.Reset(cr)
		for {
			l, err := lr.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.own != nil {
				if keep == nil || l.raw != nil || l.resumed || l.oversize {
					t.Fatalf("line at %d kept (budget %v, whole %v, resumed %v, oversize %v)", l.start, keep != nil, l.raw != nil, l.resumed, l.oversize)
				}
				if l.held != int64(len(l.own)) {
					t.Fatalf("line at %d: %d bytes kept holding %d", l.start, len(l.own), l.held)
				}
				if used, _, _ := keep.state(); used != l.held {
					t.Fatalf("line at %d: the budget has %d bytes held, the line %d", l.start, used, l.held)
				}
				l.raw = l.own
				keep.release(l.held)
				kept++
			} else if keep != nil {
				if used, _, _ := keep.state(); used != 0 {
					t.Fatalf("line at %d not kept, yet %d bytes held", l.start, used)
				}
			}
			got = append(got, l)
			raws = append(raws, bytes.Clone(l.raw))
			off = l.end
		}
		read += cr.n
		part = lr.partial()
		if part.n > 0 && part.start != off {
			t.Fatalf("partial at %d, lines end at %d", part.start, off)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d", len(got), len(want))
	}
	if off != int64(consumed) {
		t.Fatalf("consumed %d, want %d", off, consumed)
	}
	if read != len(data) {
		t.Fatalf("read %d bytes of %d", read, len(data))
	}
	var pos int64
	for i, l := range got {
		if l.start != pos || l.end != pos+int64(len(want[i]))+1 {
			t.Fatalf("line %d at [%d,%d), want [%d,%d)", i, l.start, l.end, pos, pos+int64(len(want[i]))+1)
		}
		if l.oversize != wantOver[i] {
			t.Fatalf("line %d: oversize %v, want %v", i, l.oversize, wantOver[i])
		}
		switch {
		case l.oversize:
		case l.raw != nil || (len(want[i]) == 0 && !l.resumed):
			if !bytes.Equal(raws[i], want[i]) {
				t.Fatalf("line %d: %q, want %q", i, raws[i], want[i])
			}
			if l.own != nil && l.sha != sha256.Sum256(want[i]) {
				t.Fatalf("line %d (%d bytes, kept): wrong hash", i, len(want[i]))
			}
		case l.sha != sha256.Sum256(want[i]):
			t.Fatalf("line %d (%d bytes, not held): wrong hash", i, len(want[i]))
		}
		pos = l.end
	}
	return kept
}

func TestLineReader(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 600<<10) // over the 256 KiB buffer
	for _, tc := range []struct {
		data string
		max  int
	}{
		{"", 10}, {"a", 10}, {"a\n", 10}, {"\n\n", 10}, {"abc\ndef", 10}, {"abc\r\ndef\n", 10},
		{"0123456789abc\nok\n", 10}, {string(big) + "\nok\n", 1 << 20}, {string(big) + "\nok\n", 300 << 10},
		{string(big) + "\n" + string(big), 1 << 20},
	} {
		checkReader(t, []byte(tc.data), tc.max)
		// The same file growing in pieces: 1 byte, then a few, then
		// across the buffer size.
		checkReader(t, []byte(tc.data), tc.max, 1, 3, 4, 5, 100, 300<<10, 600<<10)
	}
}

func FuzzLineReader(f *testing.F) {
	for _, s := range []string{"", "\n", "a\nb", "{\"type\":\"session\"}\r\n{}\n", "\xff\xfe\n\x00"} {
		f.Add([]byte(s), uint16(8), uint16(1), uint16(2))
	}
	if files, _ := filepath.Glob("../testdata/conformance/*.jsonl"); len(files) > 0 {
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
				f.Add(b, uint16(4096), uint16(100), uint16(1000))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, max uint16, cut1, cut2 uint16) {
		checkReader(t, data, int(max)+1, int(cut1), int(cut1)+int(cut2))
	})
}

// TestSameAsFile: a line kept from several reads is published only if the
// file still holds it; a file rewritten past the line's first read (the
// splice of two versions a kept line could be), or shrunk, is an error,
// which makes the worker read again.
func TestSameAsFile(t *testing.T) {
	line := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320,000 bytes: five reads of the scratch
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, append([]byte("head\n"), line...), 0o600); err != nil {
		t.Fatal(err)
	}
	rf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	wf, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	scratch := make([]byte, 64<<10)
	if err := sameAsFile(rf, 5, line, scratch); err != nil {
		t.Fatalf("the file holds the line: %v", err)
	}
	if _, err := wf.WriteAt([]byte("X"), 5+200000); err != nil {
		t.Fatal(err)
	}
	if err := sameAsFile(rf, 5, line, scratch); err == nil || !strings.Contains(err.Error(), "changed while it was read") {
		t.Errorf("rewritten past the first read: %v", err)
	}
	if err := wf.Truncate(100000); err != nil {
		t.Fatal(err)
	}
	if err := sameAsFile(rf, 5, line, scratch); err == nil || !strings.Contains(err.Error(), "shrank") {
		t.Errorf("shrunk: %v", err)
	}
}
