package watch

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
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
// and checks the lines against splitRef and that every byte was read once.
func checkReader(t *testing.T, data []byte, max int, cuts ...int) {
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
		case l.sha != sha256.Sum256(want[i]):
			t.Fatalf("line %d (%d bytes, not held): wrong hash", i, len(want[i]))
		}
		pos = l.end
	}
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
