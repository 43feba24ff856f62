package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

type fileStatus uint8

const (
	statusPending fileStatus = iota // no header seen yet
	statusSession                   // a pi session: lines are published
	statusIgnored                   // left alone (reason in file.ignored)
)

// file is the tailer's view of one session file. It is owned by one worker.
type file struct {
	path, rel string
	dev, ino  uint64
	size      int64
	mtime     int64 // UnixNano (modNanos): 8 bytes where a time.Time takes 24

	status  fileStatus
	ignored ignoreReason // why, when statusIgnored
	// resumed is set once the stream's resume hint was tried for this file.
	resumed bool
	// gone: the file disappeared; tombstone: its deletion still has to be
	// published.
	gone, tombstone bool
	// deferred: the last look put a read after a change in place off until
	// recheckAt; the file is not settled then (settled.go), so that every
	// walk looks at it again. (The small fields sit together: apart, each
	// took a word of padding, in a record every file of the tree has.)
	deferred bool

	sid  string
	sess *sessionLog

	// offset is where the next unread line starts: everything before it is
	// handled (published, known, or not an entry).
	offset int64
	// part is how far the last read got into the line at offset.
	part partial

	// To notice rewrites cheaply: the header line (its hash, for the
	// resume hint, and the hash of its first checkWindow bytes) and the
	// hash of the last tailLen bytes before offset (the end of the last
	// line read, its '\n' included).
	hdrStart, hdrEnd int64
	hdrSha, hdrHead  [32]byte
	tailLen          int64
	tailSum          [32]byte

	// recheckAt: a change of mtime without a change of size (an edit in
	// place) makes the whole file be read again, at most once per rescan
	// interval.
	recheckAt time.Time
	// ignoredAt is when the file was last said to be left alone (Unix
	// nanoseconds): a file swapped in and out of its name again and again
	// is said once a minute (ignore.go).
	ignoredAt int64
	// left: the session whose last file here this was before the file
	// was replaced or rewritten; its deletion waits for the new content's
	// header (settleLeft).
	left *sessionLeft
	// malformedTo is the end of the last malformed line counted: a file
	// read again after an edit in place does not count its bad lines
	// again (a replaced or truncated file does: its lines are new).
	malformedTo int64
}

// newMalformed reports whether the malformed line ending at end is one not
// counted yet, and notes it.
func (f *file) newMalformed(end int64) bool {
	if end <= f.malformedTo {
		return false
	}
	f.malformedTo = end
	return true
}

// sessionLeft is a session a file held before it was read again from its
// start.
type sessionLeft struct {
	sid  string
	sess *sessionLog
}

func (f *file) reset() {
	*f = file{path: f.path, rel: f.rel, recheckAt: f.recheckAt, left: f.left, ignoredAt: f.ignoredAt}
}

// reread drops what f knew of its file, to read it again from the start
// (the file dev/ino now). When it was the last file here of a session, the
// session is kept in f.left until the new content says whose it is.
func (w *worker) reread(f *file, dev, ino uint64) {
	sid, sess, was := f.sid, f.sess, f.status == statusSession
	if w.t.untrack(f) && was {
		f.left = &sessionLeft{sid: sid, sess: sess}
	}
	f.reset()
	f.dev, f.ino = dev, ino
}

// settleLeft publishes the deletion of the session f held before it was
// read again from its start (f.left), once the file turns out to hold
// another session or none (gone, or not a session file), and the session
// has no other file here by then: to every reader the session's last file
// is gone, as when it is removed. A file that holds the same session again
// (an editor's save through a rename) publishes nothing; one whose header
// is not complete yet waits. It can be called again after a failed
// publish.
func (w *worker) settleLeft(ctx context.Context, f *file, gone bool) error {
	l := f.left
	if l == nil || !gone && f.status == statusPending {
		return nil
	}
	if !gone && f.status == statusSession && f.sid == l.sid {
		f.left = nil
		return nil
	}
	w.t.mu.Lock()
	_, tracked := w.t.sessions[l.sid]
	w.t.mu.Unlock()
	if !tracked {
		if err := w.t.tombstone(ctx, l.sess, f.rel); err != nil {
			return err
		}
		w.t.deleted.Add(1)
		w.t.logger.Info("session file now holds another session, or none: the session it held is deleted here", "file", f.rel, "session", l.sid)
	}
	f.left = nil
	return nil
}

// statSame reports whether st matches what f last saw, with every byte up
// to the size read: nothing to do.
func (f *file) statSame(st fs.FileInfo) bool {
	return f.sig() == sigOf(st) && (f.status == statusIgnored || f.offset+f.part.n == f.size)
}

// sig is the stat f last saw, as the walk compares it (settled.go).
func (f *file) sig() fileSig {
	return fileSig{dev: int64(f.dev), ino: int64(f.ino), size: f.size, mtime: f.mtime}
}

func devIno(st fs.FileInfo) (dev, ino uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Dev), uint64(s.Ino)
	}
	return 0, 0
}

// openRegular opens path for reading without ever blocking: a FIFO (or a
// file swapped for one after the caller's stat) would block a plain open
// until a writer comes, and with it the worker. It returns the open file
// and its Fstat, or nil for anything but a regular file.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	return regularOnly(fh)
}

// openRegularAt is openRegular of path under root where a folder on its
// way may be written by other users (exposed.go): no link is followed.
func openRegularAt(root, path string) (*os.File, fs.FileInfo, error) {
	fh, err := openNoFollow(root, path)
	if err != nil {
		return nil, nil, err
	}
	return regularOnly(fh)
}

// regularOnly returns fh and its Fstat when it is a regular file that
// reads do not wait on; else it closes fh and returns nil and the Fstat.
func regularOnly(fh *os.File) (*os.File, fs.FileInfo, error) {
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, nil, fmt.Errorf("stat: %w", err)
	}
	if !st.Mode().IsRegular() {
		fh.Close()
		return nil, st, nil
	}
	if pollable(fh) {
		fh.Close()
		return nil, st, nil
	}
	return fh, st, nil
}

// pollable reports whether reads of fh may wait for data to come, as a
// device's do: a kernel file that says it is a regular one (/proc/kmsg)
// may, and the runtime parked the worker's read of it for good, and with
// it every other file of that worker (a probe on 2026-12-06, through a
// link in the sessions dir). Go puts a file in its poller when the file
// system can poll it (it then takes a deadline): procfs and sysfs files
// that can, and every file of a FUSE mount (sshfs), which is read as any
// other. So only the kernel's own files are turned away.
func pollable(fh *os.File) bool {
	return fh.SetReadDeadline(time.Time{}) == nil && kernelFile(fh)
}

// sync brings the event log up to date with the file at path.
func (w *worker) sync(ctx context.Context, path string) error {
	f := w.files[path]
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, syscall.ELOOP):
		// A link that leads round in a loop can never be read: it is
		// not a regular file, as a FIFO is not, rather than a file to
		// retry for ever (which also held back, at every start, the
		// deletions of sessions whose files went while stopped).
		if lst, lerr := os.Lstat(path); lerr == nil {
			st, err = lst, nil
		}
	case errors.Is(err, syscall.ENOTDIR):
		err = fs.ErrNotExist // a folder on its path is a file now: gone
	}
	if err == nil && f != nil && f.gone {
		// Back before its deletion was published (it waited for a
		// walk, deletions.go, or for a store that refused it): a file
		// like any new one, whose session is loaded from the stream.
		w.t.deletionDone(path)
		delete(w.files, path)
		f = nil
	}
	if err == nil && f != nil && f.statSame(st) {
		return w.settleLeft(ctx, f, false)
	}
	var fh *os.File
	linkWhy := "" // a link not followed, in a folder other users may write
	if err == nil && st.Mode().IsRegular() {
		var fst fs.FileInfo
		if why := w.t.exposed(path); why != "" {
			fh, fst, err = openRegularAt(w.t.root, path)
			if errors.Is(err, errLinkExposed) {
				if lst, lerr := os.Lstat(path); lerr == nil {
					linkWhy, fst, err = err.Error()+" ("+why+")", lst, nil
				}
			}
		} else {
			fh, fst, err = openRegular(path)
		}
		if fst != nil {
			st = fst
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		if f != nil && w.t.dirAway(path) {
			return nil // not deleted: its folder is away (discovery.away, a linked folder's target)
		}
		if f != nil {
			wait, err := w.t.fileGone(ctx, f)
			if err != nil {
				return err
			}
			if wait {
				return nil // f is kept: its deletion waits for a walk (deletions.go)
			}
			if err := w.settleLeft(ctx, f, true); err != nil {
				return err
			}
			delete(w.files, path)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if f == nil {
		rel, err := w.t.rel(path)
		if err != nil {
			if fh != nil {
				fh.Close()
			}
			return err
		}
		f = &file{path: path, rel: rel}
		w.files[path] = f
		w.t.filesTracked.Add(1)
	}
	if linkWhy != "" {
		w.leaveAlone(f, st, ignoreForeign, "why", linkWhy)
		return w.settleLeft(ctx, f, false)
	}
	if fh == nil {
		// A FIFO, socket or device named *.jsonl: never opened for reading.
		w.special(f, st)
		return w.settleLeft(ctx, f, false)
	}
	if dev, ino := devIno(st); f.dev != dev || f.ino != ino || f.ignoredFor(ignoreForeign) {
		// A file new here (or replaced): whose it is is checked once.
		if why := foreign(path, st); why != "" {
			fh.Close()
			w.leaveAlone(f, st, ignoreForeign, "why", why)
			return w.settleLeft(ctx, f, false)
		}
	}
	defer fh.Close()
	f.deferred = false
	dev, ino := devIno(st)
	if f.ino != ino || f.dev != dev || st.Size() < f.offset+f.part.n || f.ignoredFor(ignoreSpecial) || f.ignoredFor(ignoreForeign) {
		if f.offset > 0 || f.status == statusIgnored {
			w.t.logger.Info("session file replaced or truncated; reading it again", "file", f.rel)
		}
		w.reread(f, dev, ino)
	} else if st.Size() == f.size && modNanos(st) != f.mtime && f.status == statusSession {
		// Same size, new mtime: an edit in place, or a touch. Only a
		// read of the whole file can tell (the checks below look at the
		// header and the last line), so it is read again from the
		// start, and only lines the session does not hold are published.
		// At most once per rescan interval: a file touched in a loop
		// costs one read of it per interval, not one per touch. Until
		// then mtime stays unrecorded, so the next look tries again.
		now := time.Now()
		if now.Before(f.recheckAt) {
			f.deferred = true
			return nil
		}
		w.t.logger.Debug("session file changed in place; reading it again", "file", f.rel)
		counted := f.malformedTo
		w.reread(f, dev, ino)
		f.malformedTo = counted
		f.resumed = true
		f.recheckAt = now.Add(w.t.rescan)
	}
	f.size, f.mtime = st.Size(), modNanos(st)
	if f.status == statusIgnored {
		return nil
	}
	if f.offset > 0 {
		ok, err := f.verify(w.counted(fh), w.scratch())
		if err != nil {
			return err
		}
		if !ok {
			w.t.logger.Info("session file rewritten in place; reading it again", "file", f.rel)
			w.reread(f, dev, ino)
			f.size, f.mtime = st.Size(), modNanos(st)
		}
	}
	if err := w.read(ctx, f, fh); err != nil {
		return err
	}
	return w.settleLeft(ctx, f, false)
}

// special records a file that is not a regular file (a FIFO, a socket, a
// device) as ignored, once: it is never opened for reading.
func (w *worker) special(f *file, st fs.FileInfo) {
	kind := st.Mode().Type().String()
	if st.Mode().IsRegular() {
		kind = "a kernel file whose reads wait for data (pollable)"
	}
	w.leaveAlone(f, st, ignoreSpecial, "type", kind)
}

// leaveAlone records f, found as st, as ignored for why, said once for
// each file it is found as: it is not read.
func (w *worker) leaveAlone(f *file, st fs.FileInfo, why ignoreReason, attrs ...any) {
	dev, ino := devIno(st)
	if f.ignoredFor(why) && f.dev == dev && f.ino == ino {
		f.size, f.mtime = st.Size(), modNanos(st)
		return
	}
	w.reread(f, dev, ino)
	f.size, f.mtime = st.Size(), modNanos(st)
	w.t.ignore(f, why, attrs...)
}

// ignoredFor reports whether f is left alone for why.
func (f *file) ignoredFor(why ignoreReason) bool {
	return f.status == statusIgnored && f.ignored == why
}

// verify checks that the file still holds the start of the header and the
// last bytes that f consumed, byte for byte. It reads at most two
// checkWindow ranges, however long the lines are; the rest of an edit in
// place is found by the same-size check in sync.
func (f *file) verify(r io.ReaderAt, buf []byte) (bool, error) {
	if f.status == statusSession {
		n := min(f.hdrEnd-1-f.hdrStart, checkWindow)
		sum, ok, err := sumOf(r, f.hdrStart, f.hdrStart+n, buf)
		if !ok || err != nil || sum != f.hdrHead {
			return false, err
		}
	}
	if f.tailLen > 0 {
		sum, ok, err := sumOf(r, f.offset-f.tailLen, f.offset, buf)
		if !ok || err != nil || sum != f.tailSum {
			return false, err
		}
	}
	return true, nil
}

// resume tries the stream's hint for a file seen for the first time in this
// process: if the session's last stored line came from this file, the file
// was not modified since that line was stored, and the file still holds
// it (and the header the subject starts with) byte for byte, everything
// before it is already handled and reading resumes after it, without
// loading the session's known lines. A file modified since (pi appended
// while the daemon was down, or edited a line in place) is read whole.
func (w *worker) resume(ctx context.Context, f *file, fh countingFile) (bool, error) {
	_, last, err := w.t.lastOf(ctx, f.sid)
	if err != nil {
		return false, err
	}
	if err := w.t.revive(ctx, f, last); err != nil {
		return false, err
	}
	if last == nil || last.Op != "" || last.File != publishedFile(f.rel) || last.Off <= f.hdrStart || last.Off > f.size {
		return false, nil
	}
	// Modified since, by its mtime or by its change time, which no one
	// sets back: an edit in place whose mtime was put back after it (rsync
	// --inplace -t, a restore) was resumed past, and never published.
	changed := f.mtime
	if st, err := fh.f.Stat(); err == nil {
		changed = max(changed, changeNanos(st))
	}
	if last.Time.IsZero() || time.Unix(0, changed).After(last.Time) {
		return false, nil
	}
	first, err := w.t.log.First(ctx, f.sid)
	if err != nil || first == nil || first.Sha != f.hdrSha {
		return false, err
	}
	start, err := lineEndingAt(fh, last.Off, w.t.maxLine, w.scratch())
	if err != nil {
		return false, nil
	}
	sha, err := hashRange(fh, start, last.Off-1, w.scratch())
	if err != nil || sha != last.Sha {
		return false, nil
	}
	n := min(last.Off-start, checkWindow)
	sum, ok, err := sumOf(fh, last.Off-n, last.Off, w.scratch())
	if !ok || err != nil {
		return false, err
	}
	f.offset, f.tailLen, f.tailSum, f.part = last.Off, n, sum, partial{}
	return true, nil
}
