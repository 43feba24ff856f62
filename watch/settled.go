package watch

import "io/fs"

// Settled files. The periodic rescan is the truth (fsnotify is only a
// hint), but with thousands of sessions followed it used to hand every
// file to its worker every interval, which then looked at it again: a
// stat in the walk, one in the worker and the queueing in between, for
// files that did not change. A worker now records the stat of each file
// it has fully handled (everything up to its size read, nothing to
// retry), and the walk submits a file only when what it finds differs
// from that record in device, inode, size or modification time: the
// same test the worker applies first (file.statSame), so a file the
// worker would have passed over is all that is skipped. A change of
// mtime alone that the worker deferred (file.recheckAt) leaves no record,
// so the walk keeps submitting it until the worker reads it again.
//
// A walk that is not full (discover.go, statEvery) does not even stat a
// settled file in a watched folder: fsnotify hands a changed one to its
// worker, and the next full walk looks at every file.

// fileSig is what the walk compares.
type fileSig struct {
	dev, ino, size int64
	mtime          int64 // UnixNano
}

func sigOf(st fs.FileInfo) fileSig {
	dev, ino := devIno(st)
	return fileSig{dev: int64(dev), ino: int64(ino), size: st.Size(), mtime: modNanos(st)}
}

// modNanos is a file's modification time in nanoseconds since 1970, as the
// tailer keeps and compares it. (Past the year 2262 it wraps, the same
// way for every stat: a comparison for equality still holds.)
func modNanos(st fs.FileInfo) int64 { return st.ModTime().UnixNano() }

// settle records (or, when f is not settled, forgets) the stat of a file
// the worker has handled; called by the file's worker after each round.
func (t *Tailer) settle(path string, f *file, retrying bool) {
	t.settledMu.Lock()
	defer t.settledMu.Unlock()
	if f == nil || retrying || f.gone || f.deferred || (f.status != statusIgnored && f.offset+f.part.n != f.size) {
		delete(t.settled, path)
		return
	}
	t.settled[path] = f.sig()
}

// isSettled reports whether st is what the worker last handled at path.
func (t *Tailer) isSettled(path string, st fileSig) bool {
	t.settledMu.Lock()
	defer t.settledMu.Unlock()
	s, ok := t.settled[path]
	return ok && s == st
}

// hasSettled reports whether the worker recorded path as settled, whatever
// the file is now.
func (t *Tailer) hasSettled(path string) bool {
	t.settledMu.Lock()
	defer t.settledMu.Unlock()
	_, ok := t.settled[path]
	return ok
}
