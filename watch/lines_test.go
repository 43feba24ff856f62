package watch

import (
	"bytes"
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

func checkReader(t *testing.T, data []byte, max int) {
	lr := newLineReader(bytes.NewReader(data), 0, max, nil)
	want, wantOver, consumed := splitRef(data, max)
	var pos int64
	for i := 0; ; i++ {
		raw, start, end, over, err := lr.next()
		if errors.Is(err, io.EOF) {
			if i != len(want) {
				t.Fatalf("got %d lines, want %d", i, len(want))
			}
			if pos != int64(consumed) {
				t.Fatalf("consumed %d, want %d", pos, consumed)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(want) {
			t.Fatalf("extra line %d: %q", i, raw)
		}
		if start != pos || end != start+int64(len(want[i]))+1 {
			t.Fatalf("line %d at [%d,%d), want [%d,%d)", i, start, end, pos, pos+int64(len(want[i]))+1)
		}
		if over != wantOver[i] || (!over && !bytes.Equal(raw, want[i])) {
			t.Fatalf("line %d: oversize %v (want %v), %q want %q", i, over, wantOver[i], raw, want[i])
		}
		pos = end
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
	}
}

func FuzzLineReader(f *testing.F) {
	for _, s := range []string{"", "\n", "a\nb", "{\"type\":\"session\"}\r\n{}\n", "\xff\xfe\n\x00"} {
		f.Add([]byte(s), uint16(8))
	}
	if files, _ := filepath.Glob("../testdata/conformance/*.jsonl"); len(files) > 0 {
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
				f.Add(b, uint16(4096))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, max uint16) {
		checkReader(t, data, int(max)+1)
	})
}
