package replicate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A pi that has a session open appends each entry to its file by name,
// and never reads it again. When another machine deletes the session and
// this machine's copy goes to the trash (tombstone) while pi sits idle with
// it open for longer than the wait before the trash (crashAfter(Idle)),
// pi's next entry makes a new file at the old name holding that entry
// alone: no header, so pi cannot open it again and the tailer does not
// publish it. The work after the deletion would be in no session anywhere.
//
// The replicator remembers where it trashed each copy. A file at such a
// name that begins with an entry instead of a header is that pi's: the
// copy comes back from the trash with the new entries after it, under the
// old name, as if the user had restored it. The tailer then publishes a
// restore and the new lines, which bring the session back on every machine
// that admits a restore from this one (admission: one that wrote the
// session before); elsewhere the deletion stands and the session goes on
// here, as one written within the wait does (KeptWritten).

// maxTrashed bounds the copies remembered: past it, the oldest is let go
// (a pi idle that long with a session open is unlikely).
const maxTrashed = 1024

// rejoinEvery is how often at most the remembered names are looked at, on
// the replicator's wake-ups (every few seconds when idle): pi's next entry
// waits that long for its session to come back.
const rejoinEvery = time.Second

// trashedCopy is a session's copy moved to the trash for a deletion
// elsewhere.
type trashedCopy struct {
	path, sid, trash string
	at               time.Time
}

// rememberTrashed notes a copy moved from path to trash. Owned by the Run
// goroutine, like the sessions; kept across runs, not across restarts.
func (r *Replicator) rememberTrashed(sid, path, trash string) {
	if len(r.trashedCopies) >= maxTrashed {
		oldest := ""
		for p, c := range r.trashedCopies {
			if oldest == "" || c.at.Before(r.trashedCopies[oldest].at) {
				oldest = p
			}
		}
		delete(r.trashedCopies, oldest)
	}
	r.trashedCopies[path] = trashedCopy{path: path, sid: sid, trash: trash, at: r.now()}
}

// rejoinTrashed looks, at most once a rejoinEvery, at the names of copies
// moved to the trash, and puts back each one a local pi wrote to since.
func (r *Replicator) rejoinTrashed() {
	if len(r.trashedCopies) == 0 || r.now().Sub(r.rejoinedAt) < rejoinEvery {
		return
	}
	r.rejoinedAt = r.now()
	for path, c := range r.trashedCopies {
		done, err := r.rejoin(c)
		if err != nil {
			// Said once: the copy stays in the trash and pi's file as it
			// is, which the user can put together by hand.
			r.logger.Warn("a session deleted on another machine was written here after its copy went to the trash, and cannot be put back together: the copy is in the trash, pi's new lines in the session's file",
				"session", c.sid, "file", path, "trash", c.trash, "err", err)
			done = true
		}
		if done {
			delete(r.trashedCopies, path)
		}
	}
}

// rejoin puts c back together with what a local pi wrote at its name since
// it went to the trash. done reports that c needs no more looking at: put
// back, or its name taken by a session file (a restore), or its trash copy
// gone.
func (r *Replicator) rejoin(c trashedCopy) (done bool, err error) {
	if _, err := os.Lstat(c.trash); err != nil {
		return true, nil // emptied by the user, or put back by hand
	}
	f, st, err := openFile(c.path, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // pi has not written
	}
	if err != nil {
		return true, err
	}
	defer f.Close()
	if _, isHeader := readHeader(io.LimitReader(f, maxHeaderLine)); isHeader {
		return true, nil // a session file (restored, or made again)
	}
	if st.Size() == 0 {
		return false, nil // pi's line comes next
	}
	// Pi's lines, whatever the first is: an entry, or one longer than any
	// header (an image) that readHeader does not look into.
	added, err := readFrom(f, 0)
	if err != nil {
		return false, err
	}
	if len(added) == 0 || added[len(added)-1] != '\n' {
		return false, nil // pi is writing a line: its end comes first
	}
	old, err := os.ReadFile(c.trash)
	if err != nil {
		return true, err
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(old, '\n')
	}
	if err := r.putBack(c, f, append(old, added...), int64(len(added))); err != nil {
		return true, err
	}
	os.Remove(c.trash) // the session's file holds every byte of it now
	r.rejoined.Add(1)
	r.logger.Warn("a session deleted on another machine was written here by pi after its copy went to the trash: put back together, and restored from here",
		"session", c.sid, "file", c.path, "lines_added", bytes.Count(added, []byte("\n")))
	return true, nil
}

// putBack replaces pi's file (open as old, of which read bytes are in
// whole) with whole, made durable first. A line pi appended to the old file
// between the read and the rename is copied after it.
func (r *Replicator) putBack(c trashedCopy, old *os.File, whole []byte, read int64) error {
	dir := filepath.Dir(c.path)
	tmp, _, err := stage(dir, whole)
	if tmp != "" {
		defer os.Remove(tmp)
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, c.path); err != nil {
		return err
	}
	syncDir(dir)
	late, err := readFrom(old, read)
	if err != nil || len(late) == 0 {
		return err
	}
	nf, _, err := openFile(c.path, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("copy %d bytes pi wrote meanwhile: %w", len(late), err)
	}
	defer nf.Close()
	if _, err := nf.Write(late); err != nil {
		return err
	}
	return nf.Sync()
}

// readFrom reads f from off to its end.
func readFrom(f *os.File, off int64) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(io.NewSectionReader(f, off, 1<<62))
	return b.Bytes(), err
}
