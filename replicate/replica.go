package replicate

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pisyncd/pisyncd/session"
)

// replica is what the replicator knows of one local file: which lines it
// holds (by sha-256), which entry ids (with each one's line and parent),
// and which ids its entries name as parents, up to size.
type replica struct {
	path string
	sid  string
	shas map[[32]byte]struct{}
	ids  map[string]entryRef
	// parents holds every parentId an entry of the file names: only an id
	// in it can close a cycle when its line is added.
	parents map[string]struct{}
	size    int64     // bytes read (always at a line end)
	mtime   time.Time // the file's mtime after our last write
	dev     uint64    // the file last read or written: a file put in its
	ino     uint64    // place since is read again, never written blindly
	dirty   bool      // written since the last fsync
	frag    fragment  // the partial last line busy saw, if any
	ahead   fragment  // the file as busy saw it with an mtime ahead of our clock, if so
	// shrunk: the file was found shorter than read, or another file of
	// the session took its place (a truncation, a restore from an older
	// backup): lines it held may be gone (Replicator.refill). head is the
	// hash of the file's first line, headWas the one before it was read
	// again: a file that starts otherwise now was rewritten (pi's
	// migration to a new format), not cut short.
	shrunk        bool
	head, headWas [32]byte
	// unchecked: opened in a run that resumed from a saved position, and
	// not yet compared with PI_ALL (Replicator.refill).
	unchecked bool
}

// entryRef is one entry of a file: its line's hash and its parent.
type entryRef struct {
	sha    [32]byte
	parent string
}

// errReplaced means the file at a replica's path is another file than the
// one last read (pi rewrote it, or someone replaced it): read it again.
var errReplaced = errors.New("replicate: file replaced since it was read")

func newReplica(path, sid string) *replica {
	r := &replica{path: path, sid: sid}
	r.reset()
	return r
}

func (r *replica) reset() {
	r.size = 0
	r.shas, r.ids, r.parents = map[[32]byte]struct{}{}, map[string]entryRef{}, map[string]struct{}{}
}

// openReplica reads an existing file's lines.
func openReplica(path, sid string) (*replica, error) {
	r := newReplica(path, sid)
	if _, err := r.refresh(); err != nil {
		return nil, err
	}
	return r, nil
}

// openFile opens a replica's path without following a link, and checks
// that it is a regular file: a link planted in its place (to ~/.bashrc,
// say) is never read or written through.
func openFile(path string, flag int) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, fmt.Errorf("%w: %s is a link, not a session file", ErrUnsafe, path)
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, path)
	}
	return f, st, nil
}

// fileID is a file's device and inode.
func fileID(st fs.FileInfo) (dev, ino uint64) {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Dev), uint64(sys.Ino)
	}
	return 0, 0
}

// refresh reads what was appended since the last read (or everything again
// when the file shrank or was replaced). It reports whether the file ends
// in the middle of a line: a writer is busy with it.
func (r *replica) refresh() (partial bool, err error) {
	f, st, err := openFile(r.path, os.O_RDONLY)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if dev, ino := fileID(st); st.Size() < r.size || dev != r.dev || ino != r.ino {
		if r.size > 0 && !r.shrunk {
			r.shrunk, r.headWas = true, r.head
		}
		r.reset()
		r.dev, r.ino = dev, ino
	}
	if st.Size() == r.size {
		return false, nil
	}
	if r.size == 0 {
		// A file read from its start must be this session's: one a
		// user or a program put in its place with another session's
		// header would get this session's lines appended, two sessions
		// in one file that pi cannot read as either.
		if l, ok := readHeader(f); ok && l.HasID && l.ID != r.sid {
			return false, fmt.Errorf("%w: %s holds session %q, not %q", errOtherSession, r.path, l.ID, r.sid)
		}
	}
	if _, err := f.Seek(r.size, io.SeekStart); err != nil {
		return false, err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			return len(line) > 0, nil
		}
		if err != nil {
			return false, err
		}
		r.took(line[:len(line)-1])
		line = line[:0]
	}
}

// took counts line (without its "\n") as the file's next: its first
// line is its head.
func (r *replica) took(line []byte) {
	if r.size == 0 {
		r.head = sha256.Sum256(line)
	}
	r.size += int64(len(line)) + 1
	r.add(line)
}

func (r *replica) add(raw []byte) {
	sha := sha256.Sum256(raw)
	r.shas[sha] = struct{}{}
	l := session.ParseLine(raw)
	if l.Kind != session.Entry {
		return
	}
	id, parent := l.ID, l.ParentID
	if l.HasID {
		if _, ok := r.ids[id]; !ok {
			r.ids[id] = entryRef{sha: sha, parent: parent}
		}
	}
	if l.HasParent {
		r.parents[parent] = struct{}{}
	}
}

// closesCycle reports whether an entry id with parent would make a parentId
// cycle in the file (pi follows parents without a guard, and spins). Only
// an id the file's entries already name as a parent can close one.
func (r *replica) closesCycle(id, parent string) bool {
	if id == "" || parent == "" {
		return false
	}
	if id == parent {
		return true
	}
	if _, ok := r.parents[id]; !ok {
		return false
	}
	p := parent
	for n := 0; p != "" && n <= len(r.ids); n++ {
		if p == id {
			return true
		}
		e, ok := r.ids[p]
		if !ok {
			return false
		}
		p = e.parent
	}
	return p != "" // still going: the file holds a cycle already, add nothing to it
}

// busy reports whether someone else (a local pi) wrote the file within
// idle, or left a partial last line: remote lines must wait. A partial
// line that has stayed as it is for crashAfter(idle) is no writer at work
// but one that died mid-write: busy ends it with a "\n" as pi does
// (endFragment), reports its length in ended, and the file is not busy.
func (r *replica) busy(idle time.Duration, now time.Time) (busy bool, ended int64, err error) {
	st, err := os.Lstat(r.path)
	if err != nil {
		return false, 0, err
	}
	if r.asLeft(st) {
		return false, 0, nil
	}
	partial, err := r.refresh()
	if err != nil {
		return false, 0, err
	}
	seen := seenAt(st, now)
	if !partial {
		r.frag = fragment{}
		if !st.ModTime().After(now) {
			r.ahead = fragment{}
			return now.Sub(st.ModTime()) < idle, 0, nil
		}
		// An mtime ahead of our clock (a clock that was hours fast when pi
		// wrote and has been set right since, a file copied from a machine
		// whose clock is ahead) says nothing of when pi last wrote: time
		// the file's stillness on our clock instead. Before, such a file
		// held remote lines back until the clock caught up with its mtime,
		// hours with linesWaiting above zero.
		return r.ahead.unchangedFor(seen) < idle, 0, nil
	}
	if r.frag.unchangedFor(seen) < crashAfter(idle) {
		return true, 0, nil // new, changed (a writer is at work), or not for long
	}
	start := r.size
	if ok, err := r.endFragment(seen); err != nil || !ok {
		return !ok, 0, err
	}
	return false, seen.size - start, nil
}

// asLeft reports whether st is the file as the replicator left it: no one
// else wrote it since.
func (r *replica) asLeft(st fs.FileInfo) bool {
	dev, ino := fileID(st)
	return st.Mode().IsRegular() && st.Size() == r.size && st.ModTime().Equal(r.mtime) && dev == r.dev && ino == r.ino
}

// localWrite reports whether someone other than the replicator (a local pi)
// wrote the file within d: it is not as the replicator left it, and its
// mtime is within d of now (or ahead of now). seen is the file now.
func (r *replica) localWrite(d time.Duration, now time.Time) (seen fragment, written bool, err error) {
	st, err := os.Lstat(r.path)
	if err != nil {
		return seen, false, err
	}
	return seenAt(st, now), !r.asLeft(st) && now.Sub(st.ModTime()) < d, nil
}

// crashAfter is how long a partial last line must stay unchanged (same
// file, size and mtime, timed on our clock from when we first saw it) to
// be taken for a writer that died mid-line. pi writes each line with one
// appendFileSync, write calls back to back: a partial line lasts as long
// as one write call. idle is the pause after which a writer counts as
// done between lines; sixty of them (a minute at PISYNC_IDLE_AFTER's
// default of 1s) without a byte added is far beyond any stall of a write
// call (a busy disk, a slow network file system), and the session still
// catches up within a minute of pi's crash. Timed on our clock, not from
// the mtime, so a coarse or skewed file system clock cannot shorten it.
func crashAfter(idle time.Duration) time.Duration { return 60 * idle }

// fragment is a file as busy last saw it (with a partial last line, or
// an mtime ahead of our clock): its identity, size and mtime, and since
// when it has been so, on our clock.
type fragment struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
	since    time.Time
}

// seenAt is the file st as seen at now.
func seenAt(st fs.FileInfo, now time.Time) fragment {
	dev, ino := fileID(st)
	return fragment{dev: dev, ino: ino, size: st.Size(), mtime: st.ModTime(), since: now}
}

func (f fragment) same(g fragment) bool {
	return f.dev == g.dev && f.ino == g.ino && f.size == g.size && f.mtime.Equal(g.mtime) && !f.since.IsZero()
}

// unchangedFor notes the file as seen and returns how long it has been so:
// 0 when it is new or changed since f (a writer may be at work).
func (f *fragment) unchangedFor(seen fragment) time.Duration {
	if !f.same(seen) {
		*f = seen
		return 0
	}
	return seen.since.Sub(f.since)
}

// endFragment appends the "\n" that the partial last line seen lacks, as
// pi (0.84.4 and later) does when it opens such a file (spec §2): the
// fragment becomes a whole line that pi, and the tailer here, skip as
// malformed, and what is appended after it stays whole. Without it the
// file would wait for a writer that is gone, and a remote line appended
// to the fragment would be lost in it. ok is false when the file is no
// longer as seen (a writer came back): nothing is written.
func (r *replica) endFragment(seen fragment) (ok bool, err error) {
	f, st, err := openFile(r.path, os.O_APPEND|os.O_WRONLY)
	if err != nil {
		return false, err
	}
	if dev, ino := fileID(st); dev != seen.dev || ino != seen.ino || st.Size() != seen.size || !st.ModTime().Equal(seen.mtime) {
		f.Close()
		r.frag = fragment{}
		return false, nil
	}
	if _, err := f.Write([]byte{'\n'}); err != nil {
		f.Close()
		return false, err
	}
	if st, err = f.Stat(); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	r.frag = fragment{}
	if _, err := r.refresh(); err != nil { // the fragment, now a line of the file
		return false, err
	}
	r.mtime, r.dirty = st.ModTime(), true
	return true, nil
}

// appendLines writes whole lines with one O_APPEND write, as pi does.
func (r *replica) appendLines(lines [][]byte) error {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	f, st, err := openFile(r.path, os.O_APPEND|os.O_WRONLY)
	if err != nil {
		return err
	}
	if dev, ino := fileID(st); dev != r.dev || ino != r.ino || st.Size() != r.size {
		f.Close()
		return errReplaced
	}
	if n, err := f.Write(b.Bytes()); err != nil {
		// A full disk can take part of the write: the file would end in
		// a partial line that reads as a busy writer for ever (and breaks
		// the next line). Take it back while nobody appended after it.
		if n > 0 {
			if now, serr := f.Stat(); serr == nil && now.Size() == st.Size()+int64(n) {
				err = errors.Join(err, f.Truncate(st.Size()))
			}
		}
		f.Close()
		return err
	}
	after, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	r.dirty = true
	if after.Size() != st.Size()+int64(b.Len()) {
		// Another writer appended, or cut the file, between the stat and
		// the write: the file is read again from where it was (a cut
		// reads as one, and its lost lines are written back), not taken
		// to be what this write made of it, nor what it is now, which
		// would skip the other writer's line or the cut.
		r.mtime = time.Time{}
		return nil
	}
	for _, l := range lines {
		r.took(l) // r.size ends at after.Size()
	}
	r.mtime = after.ModTime()
	return nil
}

// made is the replica of a file createFile just made of lines (st its
// state then), taken from what was written rather than read back: a file
// cut before a read would otherwise read as a file that never held the
// lines cut off, and a later line whose parent was among them would wait
// for it for good.
func made(path, sid string, lines [][]byte, st fs.FileInfo) *replica {
	r := newReplica(path, sid)
	for _, l := range lines {
		r.took(l)
	}
	r.dev, r.ino = fileID(st)
	r.mtime = st.ModTime()
	return r
}

// sync makes the file's written lines durable.
func (r *replica) sync() error {
	if !r.dirty {
		return nil
	}
	f, _, err := openFile(r.path, os.O_WRONLY)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	r.dirty = false
	return nil
}

// createFile writes a new session file under a hidden staging name, makes
// it durable, and links it into place, never over an existing file. It
// returns the path used: want, or want with -1, -2, … before ".jsonl" when
// another session's file has that name already.
func createFile(root, want string, lines [][]byte) (string, fs.FileInfo, error) {
	dir := filepath.Dir(want)
	if err := safeMkdir(root, dir); err != nil {
		return "", nil, err
	}
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	tmp, st, err := stage(dir, b.Bytes())
	if tmp != "" {
		defer os.Remove(tmp)
	}
	if err != nil {
		return "", nil, err
	}
	for i := 0; i < 100; i++ {
		p := numbered(want, i)
		err := os.Link(tmp, p)
		if err == nil {
			syncDir(dir)
			return p, st, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", nil, err
		}
	}
	return "", nil, fmt.Errorf("replicate: no free file name for %s", want)
}

// stage writes data to a new file in dir under a staging name (which
// sweepStaging removes after a crash, and erase finds), made durable, and
// returns its path (removed by the caller, also when err is not nil) and
// its stat: the file a link or rename of it puts in place.
func stage(dir string, data []byte) (tmp string, st fs.FileInfo, err error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp = filepath.Join(dir, stagingPrefix+hex.EncodeToString(rnd[:])+stagingSuffix)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", nil, err
	}
	if _, err = f.Write(data); err == nil {
		if err = f.Sync(); err == nil {
			st, err = f.Stat()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return tmp, st, err
}

// numbered is path for i = 0, else path with -i before its ".jsonl": how
// pisyncd names a file whose name is taken, as pi's /import does.
func numbered(path string, i int) string {
	if i == 0 {
		return path
	}
	return strings.TrimSuffix(path, ".jsonl") + "-" + strconv.Itoa(i) + ".jsonl"
}

// safeMkdir creates dir (0700) below root, one folder at a time, and
// refuses to create or use anything through a symbolic link, checking
// before it creates: the one link it follows is a project folder directly
// in the sessions dir, which only the user can have made (pisyncd never
// makes links), and whose sessions pi lists (spec §1).
func safeMkdir(root, dir string) error {
	if err := inside(root, dir); err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return err
	}
	p, behindLink := filepath.Clean(root), false
	for i, name := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, name)
		if behindLink {
			return fmt.Errorf("%w: %s lies behind a link", ErrUnsafe, p)
		}
		link, err := checkFolder(p, i == 0)
		if errors.Is(err, fs.ErrNotExist) {
			if err = os.Mkdir(p, 0o700); errors.Is(err, fs.ErrExist) {
				link, err = checkFolder(p, i == 0) // made meanwhile: look again
			}
		}
		if err != nil {
			return err
		}
		behindLink = link
	}
	return nil
}

// checkFolder accepts an existing folder, or a link to one where links
// are allowed, and reports which it is; it returns fs.ErrNotExist for a
// missing one.
func checkFolder(p string, linkAllowed bool) (link bool, err error) {
	st, err := os.Lstat(p)
	if err != nil {
		return false, err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		if !linkAllowed {
			return true, fmt.Errorf("%w: %s is a link below a project folder", ErrUnsafe, p)
		}
		if st, err = os.Stat(p); err != nil || !st.IsDir() {
			return true, fmt.Errorf("%w: %s is a link to no folder", ErrUnsafe, p)
		}
		return true, nil
	}
	if !st.IsDir() {
		return false, fmt.Errorf("replicate: %s is not a folder", p)
	}
	return false, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// errOtherSession is a replica's file that holds another session: it is
// left alone, and the session's lines go to a file of its own.
var errOtherSession = errors.New("replicate: the file holds another session")

// firstHeaderID reads the session id of an existing file's header.
func firstHeaderID(path string) (string, bool) {
	f, _, err := openFile(path, os.O_RDONLY)
	if err != nil {
		return "", false
	}
	defer f.Close()
	l, ok := readHeader(f)
	return l.ID, ok && l.HasID
}

// maxHeaderLine bounds a line readHeader looks at. A header is a few
// hundred bytes (its cwd at most 4 KiB); a file whose first lines are
// longer is taken for no session file here. Before, a line was read whole
// however long: a 4 GiB sparse file named *.jsonl in the sessions dir took
// the daemon past 2.4 GB within 25 s of one web page asking for a session
// with no copy here (the resume command's walk, as erase's), and growing.
const maxHeaderLine = 64 << 10

// readHeader returns a file's header: its first kept line, when that is a
// header (pi skips blank and malformed lines before it). It reads at most
// 64 lines of at most maxHeaderLine bytes, and holds at most one of them.
func readHeader(r io.Reader) (session.Line, bool) {
	br := bufio.NewReaderSize(r, maxHeaderLine)
	for i := 0; i < 64; i++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			break // longer than any header: not looked into further
		}
		l := session.ParseLine(bytes.TrimSuffix(line, []byte("\n")))
		if l.Kind.Kept() {
			return l, l.Kind == session.Header
		}
		if err != nil {
			break
		}
	}
	return session.Line{}, false
}
