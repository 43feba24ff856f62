package watch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
	"time"
)

// pending is what one read has handled but not yet committed to the file
// state: lines become handled only once the lines before them are durable.
type pending struct {
	lines     []eventlog.Line
	bytes     int
	held      int64 // bytes of the budget held for lines
	off       int64
	tail      []byte // the last bytes of the line before off
	tailNew   bool
	malformed int
	ahead     *inflight // the batch before these lines, being stored (ahead.go)
	longFirst bool      // a line too long was skipped before the file's header
}

// badLine counts the malformed line ending at end, unless f's earlier
// read counted it (file.newMalformed).
func (p *pending) badLine(f *file, end int64) {
	if f.newMalformed(end) {
		p.malformed++
	}
}

// skip moves past ln: everything before its end is handled once the
// lines before it are durable.
func (p *pending) skip(ln *line) {
	p.off = ln.end
	p.tail, p.tailNew = append(p.tail[:0], ln.tail...), true
}

const (
	// A read's batch is at most what one atomic batch of the store holds.
	flushLines = eventlog.MaxBatch
	flushBytes = eventlog.MaxBatchBytes
	// maxEnvelope bounds a line's id, parentId and type together: they
	// travel in the headers of each of its messages (pi's ids are 8 hex
	// digits, session ids UUIDs).
	maxEnvelope = 8 << 10
)

// batchFull reports whether a read's batch of lines holding bytes goes to
// the store now: the line that fills it may take it past flushBytes, and
// Publish then stores it as two atomic batches.
func batchFull(lines, bytes int) bool { return lines >= flushLines || bytes >= flushBytes }

// countingFile counts the bytes read from a session file: the tailer's
// count, and its worker's (slow.go).
type countingFile struct {
	f       *os.File
	n, mine *atomic.Int64
}

func (c countingFile) Read(b []byte) (int, error) {
	n, err := c.f.Read(b)
	c.n.Add(int64(n))
	c.mine.Add(int64(n))
	return n, err
}

func (c countingFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.f.ReadAt(b, off)
	c.n.Add(int64(n))
	c.mine.Add(int64(n))
	return n, err
}

func (w *worker) counted(fh *os.File) countingFile {
	return countingFile{f: fh, n: &w.t.bytesRead, mine: &w.bytesRead}
}

// read handles the complete lines from f.offset to the end of the file.
func (w *worker) read(ctx context.Context, f *file, fh *os.File) error {
	r := w.counted(fh)
	for {
		again, err := w.readFrom(ctx, f, r)
		if err != nil || !again {
			return err
		}
	}
}

// readFrom reads from f.offset (or on from f.part) to the end of the file.
// again: the resume hint moved f.offset; read from there.
func (w *worker) readFrom(ctx context.Context, f *file, r countingFile) (again bool, err error) {
	lr := newLineReader(r, f.offset, w.t.maxLine, w.bufs.br, f.part)
	lr.keepLong(w.t.mem)
	f.part = partial{} // taken; given back at the end of a read that went well
	if _, err := r.f.Seek(lr.off, io.SeekStart); err != nil {
		return false, fmt.Errorf("seek: %w", err)
	}
	p := &pending{off: f.offset}
	pub := publishedFile(f.rel)
	defer func() {
		// Whatever ends the read, the batch in flight is waited for (and
		// committed if it was stored): no publish outlives its read.
		if serr := w.settle(f, p); serr != nil && err == nil {
			err = serr
		}
		w.t.mem.release(p.held)
	}()
	for {
		ln, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, fmt.Errorf("read: %w", err)
		}
		if ln.oversize {
			p.badLine(f, ln.end)
			p.skip(&ln)
			if f.status == statusPending {
				p.longFirst = true
			}
			// pi reads it, so the session's context here and its copies on
			// other machines lack it, and what lies only behind it: said
			// with the session, and with what would have published it.
			w.t.logger.Warn("line longer than PISYNC_MAX_LINE skipped: this session's context here and its copies on other machines lack it, and the entries before it on its branch",
				"file", f.rel, "session", f.sid, "offset", ln.start, "bytes", ln.end-ln.start, "max", w.t.maxLine,
				"hint", "raise PISYNC_MAX_LINE (up to 200MiB, within PISYNC_MEMORY_BUDGET) to publish such lines from now on; this one stays unpublished")
			continue
		}
		raw, sha, held := ln.raw, ln.sha, int64(0)
		if raw == nil {
			// A line that did not come whole: if the session holds it
			// already it is not read back (a kept copy is let go). Not
			// asked while a batch of this read is being stored: the
			// answer would wait for the store (its publish holds the
			// session), which undid the read ahead for long lines; a
			// held line read back is still not published again
			// (publish passes over what the session holds).
			if f.status == statusSession && !ln.resumed && p.ahead == nil {
				ok, err := w.t.holds(ctx, f.sess, sha)
				if err != nil {
					w.t.mem.release(ln.held)
					return false, err
				}
				if ok {
					w.t.mem.release(ln.held)
					p.skip(&ln)
					continue
				}
			}
			if ln.own != nil {
				// Kept as it went by, and sha is of these very
				// bytes; but they came in several reads, and a file
				// rewritten between two of them gives a line of
				// neither version: compared with the file once more
				// (a copy and a compare, not a second hash).
				if err := sameAsFile(r.f, ln.start, ln.own, w.scratch()); err != nil {
					w.t.mem.release(ln.held)
					return false, err
				}
				raw, held = ln.own, ln.held
			} else if raw, held, err = w.readBack(ctx, f, r, p, &ln); err != nil {
				return false, err
			}
		} else {
			sha = sha256.Sum256(raw)
		}
		l := session.ParseLine(raw) // in place: a long line is not copied
		if f.status == statusPending {
			switch {
			case l.Kind == session.Header && l.HasID:
				if err := eventlog.CheckSID(l.ID); err != nil {
					w.t.mem.release(held)
					w.t.ignore(f, ignoreLongID, "id_bytes", len(l.ID), "limit", eventlog.MaxSIDToken)
					return false, nil
				}
				f.status, f.sid = statusSession, l.ID
				f.hdrStart, f.hdrEnd, f.hdrSha = ln.start, ln.end, sha
				f.hdrHead = sha256.Sum256(raw[:min(len(raw), checkWindow)])
				f.sess = w.t.track(f)
				if !f.resumed {
					// First sight of the file in this process: bring a
					// deleted session back, or resume after the last line.
					f.resumed = true
					ok, err := w.resume(ctx, f, r)
					if err != nil || ok {
						w.t.mem.release(held)
						return ok, err
					}
				}
			case !l.Kind.Kept():
				if l.Kind == session.Malformed {
					p.badLine(f, ln.end)
				}
				w.t.mem.release(held)
				p.skip(&ln)
				continue
			default:
				w.t.mem.release(held)
				if p.longFirst {
					// Its header was the line too long, most likely: pi
					// loads the file.
					w.t.ignore(f, ignoreLongHeader, "max", w.t.maxLine,
						"hint", "raise PISYNC_MAX_LINE (up to 200MiB, within PISYNC_MEMORY_BUDGET) and restart pisyncd to publish the session")
					return false, nil
				}
				w.t.ignore(f, ignoreNotSession, "first", l.Kind.String())
				return false, nil
			}
		}
		switch l.Kind {
		case session.Header, session.Entry:
			if n := len(l.ID) + len(l.ParentID) + len(l.Type); n > maxEnvelope {
				// Every message of the line carries these in its
				// headers: past max_payload no publish of it can ever
				// succeed, and it would hold up the file for good.
				p.badLine(f, ln.end)
				w.t.mem.release(held)
				p.skip(&ln)
				w.t.logger.Warn("line whose id, parentId and type are too long to carry skipped", "file", f.rel, "offset", ln.start, "bytes", n, "max", maxEnvelope)
				continue
			}
			if held == 0 {
				// A line from the read buffer: copied, within the budget.
				if held, err = w.hold(ctx, f, p, int64(len(raw))); err != nil {
					return false, err
				}
				raw = bytes.Clone(raw)
			}
			p.skip(&ln)
			p.lines = append(p.lines, eventlog.Line{
				Raw: raw, Sha: sha, ID: l.ID, ParentID: l.ParentID, Type: l.Type, File: pub, Off: ln.end,
			})
			p.bytes += len(raw)
			p.held += held
			if batchFull(len(p.lines), p.bytes) {
				if err := w.flushAhead(ctx, f, p); err != nil {
					return false, err
				}
			}
		default:
			if l.Kind == session.Malformed || l.Kind == session.Scalar {
				p.badLine(f, ln.end)
			}
			w.t.mem.release(held)
			p.skip(&ln)
		}
	}
	if err := w.settle(f, p); err != nil {
		return false, err
	}
	if w.keep(ctx, f, p, lr.partial()) {
		return false, nil // published with the worker's group (group.go)
	}
	if err := w.flush(ctx, f, p); err != nil {
		return false, err
	}
	if pt := lr.partial(); pt.start == f.offset {
		f.part = pt
	}
	return false, nil
}

// hold takes n bytes of the budget for a line p is to hold. It waits only
// while p holds nothing: what p holds is published first, so that no two
// workers wait for each other.
func (w *worker) hold(ctx context.Context, f *file, p *pending, n int64) (int64, error) {
	if got, ok := w.t.mem.tryAcquire(n); ok {
		return got, nil
	}
	if len(p.lines) > 0 || p.held > 0 || p.ahead != nil {
		// The batch in flight holds budget too: it is given back once
		// stored (flush settles it first).
		if err := w.flush(ctx, f, p); err != nil {
			return 0, err
		}
	}
	// The worker's group holds budget too: publish it before waiting.
	w.flushGroup(ctx)
	return w.t.mem.acquire(ctx, n)
}

// readBack reads a complete line that did not come whole from the read
// buffer, once, into a buffer of its size held in the budget, and checks
// it against the hash taken as its bytes went by.
func (w *worker) readBack(ctx context.Context, f *file, r io.ReaderAt, p *pending, ln *line) ([]byte, int64, error) {
	size := ln.size()
	held, err := w.hold(ctx, f, p, size)
	if err != nil {
		return nil, 0, err
	}
	buf := make([]byte, size)
	if _, err := r.ReadAt(buf, ln.start); err != nil {
		w.t.mem.release(held)
		return nil, 0, readBackErr(ln.start, err)
	}
	if sha256.Sum256(buf) != ln.sha {
		w.t.mem.release(held)
		return nil, 0, lineChanged(ln.start)
	}
	return buf, held, nil
}

// sameAsFile reports an error unless the file holds b at off, reading it
// through scratch.
func sameAsFile(r io.ReaderAt, off int64, b, scratch []byte) error {
	for done := 0; done < len(b); {
		n := min(len(scratch), len(b)-done)
		if _, err := r.ReadAt(scratch[:n], off+int64(done)); err != nil {
			return readBackErr(off, err)
		}
		if !bytes.Equal(scratch[:n], b[done:done+n]) {
			return lineChanged(off)
		}
		done += n
	}
	return nil
}

// readBackErr is the error of reading back the line at off: the worker
// reads the file again.
func readBackErr(off int64, err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("line at offset %d: the file shrank while it was read", off)
	}
	return fmt.Errorf("read: %w", err)
}

// lineChanged says the line at off is not what was read of it.
func lineChanged(off int64) error {
	return fmt.Errorf("line at offset %d changed while it was read; reading it again", off)
}

// flush publishes the pending lines the session does not hold yet and, once
// they are durable, commits the read position. The batch in flight before
// them, if any, is stored and committed first.
func (w *worker) flush(ctx context.Context, f *file, p *pending) error {
	if err := w.settle(f, p); err != nil {
		return err
	}
	if len(p.lines) > 0 {
		if err := w.t.publish(ctx, f.sess, p.lines); err != nil {
			return err
		}
	}
	w.t.mem.release(p.held)
	f.offset = p.off
	if p.tailNew {
		h := sha256.New()
		h.Write(p.tail)
		h.Write([]byte{'\n'})
		f.tailLen = int64(len(p.tail)) + 1
		h.Sum(f.tailSum[:0])
		p.tailNew = false
	}
	if p.malformed > 0 {
		w.t.malformed.Add(int64(p.malformed))
		w.malformedWarn(f.rel, p.malformed, time.Now())
	}
	clear(p.lines) // drop the references: the budget no longer covers them
	p.lines, p.bytes, p.held, p.malformed = p.lines[:0], 0, 0, 0
	return nil
}
