package projection

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// fileBodies reads the bodies of a context query from this machine's own
// session files, at the places the projection recorded (lineLocs), before
// the store is asked: one pread per run of nearby lines instead of a
// consumer, the server's block loads and the client's parsing of every
// message. The files belong to pi and to whoever else can write there, so
// nothing read is believed: a line is served only when its bytes hash to
// the sha-256 of its event. A line that is not there (the file rewritten,
// truncated, replaced, changed in place, gone, not a regular file) is
// left to the store, so the answer is the store's either way.
//
// A query's stretches read one at a time (streamBodies), each on its own
// goroutine while the one before is written: the reads and the hashing
// run on another core than the rendering. Files stay open for the query.
type fileBodies struct {
	root  string
	locs  lineLocs // a copy taken under the session's lock
	files map[string]*openFile

	// free holds chunks no body refers to any more (release), for the
	// next stretches' reads: a 200 MB context then reads into a few
	// chunks instead of allocating (and zeroing, and collecting) 200 MB.
	mu   sync.Mutex
	free [][]byte
}

// fileChunk is the largest chunk lines are read into.
const fileChunk = fileRead

// chunks is where one stretch reads its lines. When the query recycles
// (streamBodies.recycle), runs are carved from chunks of size bytes (half
// the read-ahead, at most fileChunk), taken from the free list when there
// are any, so what the chunks hold stays within a few stretches; a longer
// run gets a buffer of its own. Otherwise each run gets a buffer of its
// size: its bodies may be kept (the body cache, a built Context), and a
// kept body must not hold a chunk much larger than itself.
type chunks struct {
	fb      *fileBodies
	size    int64
	recycle bool
	cur     []byte   // the unused rest of the last chunk
	used    [][]byte // every chunk taken, for release
}

func (c *chunks) alloc(n int64) []byte {
	if !c.recycle || n > c.size {
		return make([]byte, n)
	}
	if int64(len(c.cur)) < n {
		c.cur = nil
		c.fb.mu.Lock()
		if k := len(c.fb.free); k > 0 {
			c.cur = c.fb.free[k-1]
			c.fb.free = c.fb.free[:k-1]
		}
		c.fb.mu.Unlock()
		if c.cur == nil {
			c.cur = make([]byte, c.size)
		}
		c.used = append(c.used, c.cur)
	}
	b := c.cur[:n:n]
	c.cur = c.cur[n:]
	return b
}

// release gives the chunks of a stretch back: the caller knows that no
// body read into them is referred to any more.
func (fb *fileBodies) release(c *chunks) {
	if c == nil {
		return
	}
	fb.mu.Lock()
	for _, b := range c.used {
		fb.free = append(fb.free, b[:cap(b)])
	}
	fb.mu.Unlock()
	c.used, c.cur = nil, nil
}

type openFile struct {
	f    *os.File // nil: not readable, every line of it goes to the store
	size int64
}

// fileGap is the most bytes between two wanted lines that one read passes
// over (lines of the file outside the window: labels, model changes);
// lines further apart are read separately, so a read holds little that is
// not served.
const fileGap = 16 << 10

// fileRead bounds the bytes of one read (a single longer line is read
// whole).
const fileRead = 4 << 20

func newFileBodies(root string, locs lineLocs) *fileBodies {
	if root == "" || len(locs.seqs) == 0 {
		return nil
	}
	return &fileBodies{root: root, locs: locs, files: map[string]*openFile{}}
}

// fileLine is a wanted line and its place.
type fileLine struct {
	ref session.Ref
	loc lineLoc
}

func (l fileLine) start() int64 { return l.loc.end - l.loc.n - 1 }

// read serves what it can of refs from the files through put and returns
// the rest, for the store. Only the context's end stops it early.
// Lines are read into buf's chunks.
func (fb *fileBodies) read(ctx context.Context, refs []session.Ref, buf *chunks, put func(session.Ref, []byte)) (rest []session.Ref, err error) {
	byFile := map[string][]fileLine{}
	for _, r := range refs {
		if refStream(r) != eventlog.LocalStream {
			rest = append(rest, r)
			continue
		}
		loc, ok := fb.locs.find(refSeq(r))
		if !ok {
			rest = append(rest, r)
			continue
		}
		byFile[loc.file] = append(byFile[loc.file], fileLine{ref: r, loc: loc})
	}
	for name, lines := range byFile {
		of := fb.open(name)
		slices.SortFunc(lines, func(a, b fileLine) int { return cmp.Compare(a.start(), b.start()) })
		for len(lines) > 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			n := 1 // lines[:n] are read at once
			for n < len(lines) && lines[n].start() >= lines[n-1].loc.end &&
				lines[n].start()-lines[n-1].loc.end <= fileGap && lines[n].loc.end-lines[0].start() <= fileRead {
				n++
			}
			run := lines[:n]
			lines = lines[n:]
			rest = append(rest, fb.readRun(of, run, buf, put)...)
		}
	}
	return rest, nil
}

// readRun reads the lines of run (sorted, not overlapping) with one read
// and serves those that match their sha; it returns the others.
func (fb *fileBodies) readRun(of *openFile, run []fileLine, c *chunks, put func(session.Ref, []byte)) (rest []session.Ref) {
	lo, hi := run[0].start(), run[len(run)-1].loc.end
	var buf []byte
	if of.f != nil && hi <= of.size {
		buf = c.alloc(hi - lo)
		n, err := of.f.ReadAt(buf, lo)
		if err != nil && !errors.Is(err, io.EOF) {
			n = 0 // read error: all to the store
		}
		buf = buf[:n]
	}
	for _, l := range run {
		a, b := l.start()-lo, l.loc.end-1-lo // the line, without its '\n'
		if b+1 > int64(len(buf)) {
			rest = append(rest, l.ref) // short read: the file shrank
			continue
		}
		line := buf[a:b]
		if buf[b] != '\n' || sha256.Sum256(line) != l.loc.sha {
			rest = append(rest, l.ref)
			continue
		}
		put(l.ref, session.ToValidUTF8(line))
	}
	return rest
}

// open opens the file name (relative to the root, as Pi-File has it)
// once per query. Only a regular file is read: a fifo or a device put in
// its place would block or never end.
func (fb *fileBodies) open(name string) *openFile {
	if of, ok := fb.files[name]; ok {
		return of
	}
	of := &openFile{}
	fb.files[name] = of
	rel := filepath.FromSlash(name)
	if !filepath.IsLocal(rel) {
		return of
	}
	f, err := os.OpenFile(filepath.Join(fb.root, rel), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return of
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return of
	}
	of.f, of.size = f, st.Size()
	return of
}

// close closes the files the query opened.
func (fb *fileBodies) close() error {
	var errs []error
	for name, of := range fb.files {
		if of.f != nil {
			if err := of.f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("projection: close %s: %w", name, err))
			}
		}
	}
	clear(fb.files)
	return errors.Join(errs...)
}
