package watch

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// lineReader yields the complete lines of a file from a start offset. A
// line longer than max is reported as oversize (its bytes dropped as they go
// by, never held whole); the partial line after the last '\n' is not
// returned at all: it is not final until its '\n' arrives.
type lineReader struct {
	br   *bufio.Reader
	max  int
	off  int64 // offset of the next unread byte
	long []byte
}

// readBufSize is the line reader's buffer: lines longer than it are joined
// from several reads.
const readBufSize = 256 << 10

// newLineReader reads r from offset start. br, when not nil, is a buffer to
// reuse (a worker keeps one: a fresh 256 KiB buffer per append would make
// most of the daemon's garbage).
func newLineReader(r io.Reader, start int64, max int, br *bufio.Reader) *lineReader {
	if br == nil {
		br = bufio.NewReaderSize(r, readBufSize)
	} else {
		br.Reset(r)
	}
	return &lineReader{br: br, max: max, off: start}
}

// next returns the next complete line without its '\n', the offsets where it
// starts and where the next line starts, and oversize when the line was
// longer than max (raw is nil then). At the end of the complete lines it
// returns io.EOF. raw is only valid until the next call.
func (lr *lineReader) next() (raw []byte, start, end int64, oversize bool, err error) {
	start = lr.off
	lr.long = lr.long[:0]
	for {
		chunk, err := lr.br.ReadSlice('\n')
		lr.off += int64(len(chunk))
		switch {
		case err == nil:
			if oversize {
				return nil, start, lr.off, true, nil
			}
			if len(lr.long) == 0 {
				raw = chunk[:len(chunk)-1]
			} else {
				lr.long = append(lr.long, chunk[:len(chunk)-1]...)
				raw = lr.long
			}
			if len(raw) > lr.max {
				return nil, start, lr.off, true, nil
			}
			return raw, start, lr.off, false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if !oversize {
				if len(lr.long)+len(chunk) > lr.max {
					oversize = true
					lr.long = lr.long[:0]
				} else {
					lr.long = append(lr.long, chunk...)
				}
			}
		case errors.Is(err, io.EOF):
			// A partial line: not final. The caller resumes from start.
			return nil, start, start, false, io.EOF
		default:
			return nil, start, start, false, err
		}
	}
}

// lineEndingAt finds the line that ends just before the '\n' at end-1 by
// reading backwards from r, at most max bytes. It returns the line's start.
func lineEndingAt(r io.ReaderAt, end int64, max int) (int64, error) {
	if end <= 0 {
		return 0, errors.New("no line before offset 0")
	}
	pos := end - 1 // the '\n'
	buf := make([]byte, 64<<10)
	for pos > 0 {
		n := int64(len(buf))
		if n > pos {
			n = pos
		}
		if _, err := r.ReadAt(buf[:n], pos-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return pos - n + int64(i) + 1, nil
		}
		pos -= n
		if end-1-pos > int64(max) {
			return 0, errors.New("line longer than the limit")
		}
	}
	return 0, nil
}
