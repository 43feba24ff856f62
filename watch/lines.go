package watch

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"hash"
	"io"
)

// readBufSize is the line reader's buffer. A line that fits in it and
// arrives whole is handed out straight from the buffer; any other line is
// hashed as it goes by and, unless it was kept as it went by (keepLong),
// read back once, when its '\n' is there.
const readBufSize = 256 << 10

// checkWindow bounds what rewrite detection reads per look at a file: the
// first bytes of the header line and the last bytes before the read
// position.
const checkWindow = 4 << 10

// lineReader yields the complete lines of a file from a start offset and
// reads every byte once. A line that does not come whole in one buffer (it
// is longer than the buffer, or its end is not written yet) is never
// accumulated: its sha-256 runs as its bytes go by, and the caller reads
// it back whole once it is complete (or skips it: oversize, or already
// stored). The partial line after the last '\n' is not returned; its
// progress (partial) lets the next read go on from where this one ended
// instead of reading the line again from its start.
type lineReader struct {
	br  *bufio.Reader
	max int64
	off int64 // offset of the next unread byte

	// The line being read.
	start   int64
	n       int64     // its bytes so far, without '\n'
	h       hash.Hash // sha-256 of them; nil while none or over max
	over    bool      // longer than max: skipped
	resumed bool      // begun in an earlier read
	tail    []byte    // its last checkWindow-1 bytes at most

	// Keeping long lines (keepLong): the line's bytes so far, copied as
	// they went by, and the budget they hold. keeping is false once the
	// line cannot be kept (no room, begun in an earlier read, over max).
	keep     *budget
	keeping  bool
	chunks   [][]byte
	keptHeld int64
}

// line is one complete line. raw is set when the line came whole from the
// buffer (valid until the next call); otherwise sha and size say what to
// read back from [start, end-1), unless oversize.
type line struct {
	start, end int64 // its first byte, and the byte after its '\n'
	raw        []byte
	sha        [32]byte // of a line without raw
	oversize   bool
	resumed    bool   // begun in an earlier read: read it back to be sure of its bytes
	tail       []byte // its last bytes, at most checkWindow-1 (valid until the next call)
	// own is a long line's bytes kept as they went by (keepLong), whose
	// sha is sha: the caller's, holding held bytes of the budget.
	own  []byte
	held int64
}

func (l *line) size() int64 { return l.end - 1 - l.start }

// partial is how far a read got into a line without its '\n': where the
// line starts, how many bytes of it were read and the sha-256 state after
// them. It is only good for a file whose bytes before start+n did not
// change (rewrite detection runs first; a line read back is checked
// against its hash).
type partial struct {
	start, n int64
	state    []byte // sha-256 state; nil when over
	over     bool
	tail     []byte
}

// newLineReader reads from offset start, or on from p when p is progress
// into the line at start; the caller positions the reader at lr.off. br,
// when not nil, is a buffer to reuse over r.
func newLineReader(r io.Reader, start int64, max int, br *bufio.Reader, p partial) *lineReader {
	if br == nil {
		br = bufio.NewReaderSize(r, readBufSize)
	} else {
		br.Reset(r)
	}
	lr := &lineReader{br: br, max: int64(max), off: start, start: start}
	if p.n > 0 && p.start == start {
		h := sha256.New()
		if p.state == nil || h.(encoding.BinaryUnmarshaler).UnmarshalBinary(p.state) == nil {
			if p.state != nil {
				lr.h = h
			}
			lr.n, lr.over, lr.resumed, lr.off = p.n, p.over || p.state == nil, true, start+p.n
			lr.tail = append(lr.tail[:0], p.tail...)
		}
	}
	return lr
}

// keepLong has the reader copy the bytes of a line that does not come
// whole from the buffer as they go by, within b (taken without waiting),
// and hand them out with it once complete: such a line is then read
// once and hashed once, instead of being read back and hashed again. A
// line it has no room for, one begun in an earlier read, or one over max
// is not kept (the caller reads it back as before); a partial line's
// copy is dropped at the end of the read.
func (lr *lineReader) keepLong(b *budget) { lr.keep = b }

// dropKept gives back what is kept of the current line and keeps no more
// of it.
func (lr *lineReader) dropKept() {
	if lr.keptHeld > 0 {
		lr.keep.release(lr.keptHeld)
	}
	clear(lr.chunks)
	lr.chunks, lr.keptHeld, lr.keeping = lr.chunks[:0], 0, false
}

// keepChunk copies b, the next bytes of the line being kept, within the
// budget.
func (lr *lineReader) keepChunk(b []byte) {
	n := int64(len(b))
	if n == 0 {
		return
	}
	if !lr.keep.tryAcquireAll(n) {
		lr.dropKept()
		return
	}
	lr.keptHeld += n
	lr.chunks = append(lr.chunks, bytes.Clone(b))
}

// takeKept joins the kept line into one buffer of its size (within the
// budget: the copies are given back once joined) and hands it out with
// the budget it holds; nil when there is no room or nothing kept.
func (lr *lineReader) takeKept() (own []byte, held int64) {
	defer lr.dropKept()
	if !lr.keeping || lr.n != lr.keptHeld {
		return nil, 0
	}
	if !lr.keep.tryAcquireAll(lr.n) {
		return nil, 0
	}
	return bytes.Join(lr.chunks, nil), lr.n
}

// partial returns the progress into the line without its '\n' at the end
// of the read (zero when the read ended on a line boundary).
func (lr *lineReader) partial() partial {
	if lr.n == 0 {
		return partial{}
	}
	p := partial{start: lr.start, n: lr.n, over: lr.over, tail: bytes.Clone(lr.tail)}
	if lr.h != nil {
		s, err := lr.h.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			return partial{} // cannot happen with crypto/sha256; read it again
		}
		p.state = s
	}
	return p
}

// add takes bytes of the current line that are not its whole.
func (lr *lineReader) add(b []byte) {
	if lr.n == 0 && !lr.resumed {
		lr.keeping = lr.keep != nil // the line's first bytes
	}
	lr.n += int64(len(b))
	lr.tail = appendTail(lr.tail, b)
	if lr.over {
		return
	}
	if lr.n > lr.max {
		lr.over, lr.h = true, nil
		lr.dropKept()
		return
	}
	if lr.h == nil {
		lr.h = sha256.New()
	}
	lr.h.Write(b)
	if lr.keeping {
		lr.keepChunk(b)
	}
}

// appendTail keeps the last checkWindow-1 bytes of tail+b.
func appendTail(tail, b []byte) []byte {
	const keep = checkWindow - 1
	if len(b) >= keep {
		return append(tail[:0], b[len(b)-keep:]...)
	}
	if drop := len(tail) + len(b) - keep; drop > 0 {
		tail = append(tail[:0], tail[drop:]...)
	}
	return append(tail, b...)
}

// next returns the next complete line. At the end of the complete lines it
// returns io.EOF; partial then tells how far the read got.
func (lr *lineReader) next() (line, error) {
	for {
		chunk, err := lr.br.ReadSlice('\n')
		lr.off += int64(len(chunk))
		switch {
		case err == nil:
			data := chunk[:len(chunk)-1]
			l := line{start: lr.start, end: lr.off, resumed: lr.resumed}
			switch {
			case lr.n == 0:
				// The common case: the whole line from the buffer.
				l.tail = data[len(data)-min(len(data), checkWindow-1):]
				if l.oversize = int64(len(data)) > lr.max; !l.oversize {
					l.raw = data
				}
			default:
				lr.add(data)
				l.tail, l.oversize = lr.tail, lr.over
				if !lr.over {
					lr.h.Sum(l.sha[:0])
					l.own, l.held = lr.takeKept()
				}
			}
			lr.start, lr.n, lr.h, lr.over, lr.resumed = lr.off, 0, nil, false, false
			lr.tail = lr.tail[:0]
			return l, nil
		case errors.Is(err, bufio.ErrBufferFull):
			lr.add(chunk)
		case errors.Is(err, io.EOF):
			lr.add(chunk) // a partial line: not final, but read
			lr.dropKept() // its progress is partial's hash state
			return line{}, io.EOF
		default:
			lr.dropKept()
			return line{}, err
		}
	}
}

// lineEndingAt finds the line that ends just before the '\n' at end-1 by
// reading backwards from r through buf, at most max bytes. It returns the
// line's start. (A buffer of its own per call made a restart over 10,000
// files allocate 640 MB for their last lines of a few hundred bytes.)
func lineEndingAt(r io.ReaderAt, end int64, max int, buf []byte) (int64, error) {
	if end <= 0 {
		return 0, errors.New("no line before offset 0")
	}
	pos := end - 1 // the '\n'
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

// hashRange returns the sha-256 of r's bytes [start, end), read through
// buf: whatever the length, it holds no more than buf.
func hashRange(r io.ReaderAt, start, end int64, buf []byte) ([32]byte, error) {
	var sum [32]byte
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.NewSectionReader(r, start, end-start), buf); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}

// sumOf is the sha-256 of r's bytes [start, end), a short range that fits
// in buf; ok is false when the file no longer has them.
func sumOf(r io.ReaderAt, start, end int64, buf []byte) (sum [32]byte, ok bool, err error) {
	if end-start > int64(len(buf)) {
		return sum, false, fmt.Errorf("sum of %d bytes: buffer of %d", end-start, len(buf))
	}
	buf = buf[:end-start]
	if _, err := r.ReadAt(buf, start); err != nil {
		if errors.Is(err, io.EOF) {
			return sum, false, nil
		}
		return sum, false, fmt.Errorf("read: %w", err)
	}
	return sha256.Sum256(buf), true, nil
}
