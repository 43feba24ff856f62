package watch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

type fileStatus uint8

const (
	statusPending fileStatus = iota // no header seen yet
	statusSession                   // a pi session: lines are published
	statusIgnored                   // not a pi session: left alone
)

// file is the tailer's view of one session file. It is owned by one worker.
type file struct {
	path, rel string
	dev, ino  uint64
	size      int64
	mtime     time.Time

	status fileStatus
	sid    string
	sess   *sessionLog
	// resumed is set once the stream's resume hint was tried for this file.
	resumed bool
	// gone: the file disappeared; tombstone: its deletion still has to be
	// published.
	gone, tombstone bool

	// offset is where the next unread line starts: everything before it is
	// handled (published, known, or not an entry).
	offset int64
	// The header line and the last line before offset, to notice rewrites.
	hdrStart, hdrEnd int64
	hdrSha           [32]byte
	lastStart        int64 // -1: not checkable (an oversize line)
	lastSha          [32]byte
}

func (f *file) reset() {
	*f = file{path: f.path, rel: f.rel, lastStart: -1}
}

// statSame reports whether st matches what f last saw, with every byte up
// to the size consumed: nothing to do.
func (f *file) statSame(st fs.FileInfo) bool {
	dev, ino := devIno(st)
	return f.ino == ino && f.dev == dev && f.size == st.Size() && f.mtime.Equal(st.ModTime()) &&
		(f.status == statusIgnored || f.offset == f.size)
}

func devIno(st fs.FileInfo) (dev, ino uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Dev), uint64(s.Ino)
	}
	return 0, 0
}

// sync brings the event log up to date with the file at path.
func (w *worker) sync(ctx context.Context, path string) error {
	f := w.files[path]
	if f != nil {
		if st, err := os.Stat(path); err == nil && f.statSame(st) {
			return nil
		}
	}
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if f != nil {
			if err := w.t.fileGone(ctx, f); err != nil {
				return err
			}
			delete(w.files, path)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil
	}
	if f == nil {
		rel, err := w.t.rel(path)
		if err != nil {
			return err
		}
		f = &file{path: path, rel: rel, lastStart: -1}
		w.files[path] = f
		w.t.filesTracked.Add(1)
	}
	dev, ino := devIno(st)
	if f.ino != ino || f.dev != dev || st.Size() < f.offset {
		if f.offset > 0 || f.status == statusIgnored {
			w.t.logger.Info("session file replaced or truncated; reading it again", "file", f.rel)
		}
		w.t.untrack(f)
		f.reset()
		f.dev, f.ino = dev, ino
	}
	f.size, f.mtime = st.Size(), st.ModTime()
	if f.status == statusIgnored {
		return nil
	}
	if f.offset > 0 {
		ok, err := f.verify(fh, w.t.maxLine)
		if err != nil {
			return err
		}
		if !ok {
			w.t.logger.Info("session file rewritten in place; reading it again", "file", f.rel)
			w.t.untrack(f)
			f.reset()
			f.dev, f.ino = dev, ino
			f.size, f.mtime = st.Size(), st.ModTime()
		}
	}
	return w.read(ctx, f, fh)
}

// verify checks that the file still holds the header and the last line
// that f consumed, byte for byte.
func (f *file) verify(r io.ReaderAt, max int) (bool, error) {
	check := func(start, end int64, want [32]byte) (bool, error) {
		if end-start > int64(max) {
			return true, nil
		}
		buf := make([]byte, end-start)
		if _, err := r.ReadAt(buf, start); err != nil {
			if errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, fmt.Errorf("verify: %w", err)
		}
		return sha256.Sum256(buf) == want, nil
	}
	if f.status == statusSession {
		if ok, err := check(f.hdrStart, f.hdrEnd-1, f.hdrSha); !ok || err != nil {
			return ok, err
		}
	}
	if f.lastStart >= 0 {
		return check(f.lastStart, f.offset-1, f.lastSha)
	}
	return true, nil
}

// pending is what one read has handled but not yet committed to the file
// state: lines become handled only once the lines before them are durable.
type pending struct {
	lines     []eventlog.Line
	bytes     int
	off       int64
	lastStart int64
	lastSha   [32]byte
	malformed int
}

const (
	flushLines = eventlog.MaxBatch
	flushBytes = 8 << 20
)

// read handles the complete lines from f.offset to the end of the file.
func (w *worker) read(ctx context.Context, f *file, fh *os.File) error {
restart:
	if _, err := fh.Seek(f.offset, io.SeekStart); err != nil {
		return fmt.Errorf("seek: %w", err)
	}
	lr := newLineReader(fh, f.offset, w.t.maxLine, w.buf)
	p := pending{off: f.offset, lastStart: f.lastStart, lastSha: f.lastSha}
	for {
		raw, start, end, oversize, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		p.off = end
		if oversize {
			p.malformed++
			p.lastStart = -1
			w.t.logger.Warn("line longer than the limit skipped", "file", f.rel, "offset", start, "max", w.t.maxLine)
			continue
		}
		sha := sha256.Sum256(raw)
		p.lastStart, p.lastSha = start, sha
		l := session.ParseLine(raw)
		if f.status == statusPending {
			switch {
			case l.Kind == session.Header && l.HasID:
				f.status, f.sid = statusSession, l.ID
				f.hdrStart, f.hdrEnd, f.hdrSha = start, end, sha
				f.sess = w.t.track(f)
				if !f.resumed {
					// First sight of the file in this process: bring a
					// deleted session back, or resume after the last line.
					_, last, err := w.t.log.Last(ctx, f.sid)
					if err != nil {
						return err
					}
					if err := w.t.revive(ctx, f, last); err != nil {
						return err
					}
					f.resumed = true
					ok, err := w.resume(ctx, f, fh, last)
					if err != nil {
						return err
					}
					if ok {
						goto restart
					}
				}
			case !l.Kind.Kept():
				if l.Kind == session.Malformed {
					p.malformed++
				}
				continue
			default:
				f.status = statusIgnored
				w.t.filesIgnored.Add(1)
				w.t.logger.Info("not a pi session file; ignoring it", "file", f.rel, "first", l.Kind.String())
				return nil
			}
		}
		switch l.Kind {
		case session.Header, session.Entry:
			p.lines = append(p.lines, eventlog.Line{
				Raw: bytes.Clone(raw), Sha: sha, ID: l.ID, ParentID: l.ParentID, Type: l.Type,
				File: f.rel, Off: end,
			})
			p.bytes += len(raw)
			if len(p.lines) >= flushLines || p.bytes >= flushBytes {
				if err := w.flush(ctx, f, &p); err != nil {
					return err
				}
			}
		case session.Malformed, session.Scalar:
			p.malformed++
		}
	}
	return w.flush(ctx, f, &p)
}

// flush publishes the pending lines the session does not hold yet and, once
// they are durable, commits the read position.
func (w *worker) flush(ctx context.Context, f *file, p *pending) error {
	if len(p.lines) > 0 {
		if err := w.t.publish(ctx, f.sess, p.lines); err != nil {
			return err
		}
	}
	f.offset, f.lastStart, f.lastSha = p.off, p.lastStart, p.lastSha
	if p.malformed > 0 {
		w.t.malformed.Add(int64(p.malformed))
		w.t.logger.Warn("malformed lines skipped", "file", f.rel, "count", p.malformed)
	}
	p.lines, p.bytes, p.malformed = p.lines[:0], 0, 0
	return nil
}

// resume tries the stream's hint for a file seen for the first time in this
// process: if the session's last stored line came from this file and the
// file still holds it (and the header the subject starts with) byte for
// byte, everything before it is already handled and reading resumes after
// it, without loading the session's known lines.
func (w *worker) resume(ctx context.Context, f *file, fh *os.File, last *eventlog.Event) (bool, error) {
	if last == nil || last.Op != "" || last.File != f.rel || last.Off <= f.hdrStart || last.Off > f.size {
		return false, nil
	}
	first, err := w.t.log.First(ctx, f.sid)
	if err != nil || first == nil || first.Sha != f.hdrSha {
		return false, err
	}
	start, err := lineEndingAt(fh, last.Off, w.t.maxLine)
	if err != nil {
		return false, nil
	}
	buf := make([]byte, last.Off-1-start)
	if _, err := fh.ReadAt(buf, start); err != nil {
		return false, nil
	}
	sha := sha256.Sum256(buf)
	if sha != last.Sha {
		return false, nil
	}
	f.offset, f.lastStart, f.lastSha = last.Off, start, sha
	return true, nil
}
