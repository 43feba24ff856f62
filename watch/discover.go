package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// discovery finds session files: fsnotify for speed, a periodic walk of the
// whole tree for truth (events can be dropped, watches can be missing for a
// folder created between two events, and some file systems send none).
type discovery struct {
	t *Tailer
	// slowSaid is the slow file last named in the log (slow.go), and
	// since when it was read.
	slowSaid reading
	w        *fsnotify.Watcher
	watched  map[string]struct{}
	// walkErr is the error the last walk failed with ("" if it worked),
	// said once (rescanned); walkErrSince when walks began to fail.
	walkErr      string
	walkErrSince time.Time
	// seen holds the *.jsonl paths found by the last walk, each as its
	// own value: the string a walk keeps for a path is the one the walk
	// before kept (prev, keep), not the fresh one filepath.Join made.
	seen map[string]string
	// spare is the map of the walk before (cleared): the walks take
	// turns with two maps instead of making one of 10,000 entries each
	// interval.
	spare  map[string]string
	prev   map[string]string // the last walk's seen, during a walk
	walked chan struct{}     // closed after the first walk
	found  int               // session files the first walk found; read after walked

	// owner is the one path each file (device and inode) is followed
	// under: a hard link, or two links to one project folder, must not
	// make one file two files of its session. The first path seen keeps
	// it while it is there.
	owner map[fileKey]string
	keyOf map[string]fileKey
	dups  map[string]struct{} // paths passed over in the last walk
	// Folders the last walk could not read or watch, each logged once
	// when it became so and once when it recovered.
	unreadable, unwatched map[string]error
	walkUnreadable        map[string]error
	walkUnwatched         map[string]error

	// walks counts the walks; full says whether the one under way looks
	// at every file (see found1 and statEvery).
	walks int
	full  bool
	// dirs is what the last walk found in each folder it read or passed
	// over; reading is what the walk under way finds (nil outside a walk).
	dirs, reading map[string]*dirState
	// swept is when dropKnown last let go of idle sessions' hashes.
	swept time.Time
	// rootKey is the folder the sessions dir was at the last walk that
	// compared the files it found with the walk's before; rootLost says
	// that the sessions dir was seen gone since.
	rootKey  fileKey
	rootLost bool
}

// dirState is a folder as a walk read it: its stat, taken before the read
// (so a change during the read makes the next walk read it again), and
// the session files in it. A walk that is not full passes over a watched
// folder without subfolders whose stat is unchanged (no entry was added,
// removed or renamed: each changes the folder's mtime), and takes its
// files from here instead of reading it again.
type dirState struct {
	sig     fileSig
	files   []string
	subdirs bool
}

// statEvery: one walk in statEvery reads every folder and looks at (stats)
// every session file. The others stat every folder and read each one whose
// stat changed (an entry added, removed or renamed changes its mtime), that
// is not watched or that has subfolders (dirState): new, removed and
// renamed files are still found at every walk. They stat every file,
// except a file that is settled (its worker handled exactly what it last
// saw: settled.go) in a folder that is watched: a change to such a file
// makes fsnotify send an event, which hands it to its worker at once. So
// fsnotify is still only a hint: a change it misses (a write through a
// memory map, a file system that sends no events for some writes) is found
// within statEvery rescan intervals (60 s by default) instead of one, and
// at the next walk after the watcher reports lost events, which is a full
// one. With 10,000 sessions the stats and the reads of every folder were
// most of an idle daemon's CPU and of its garbage.
const statEvery = 6

// fileKey identifies a file or folder: device and inode.
type fileKey struct{ dev, ino uint64 }

func (s fileSig) key() fileKey { return fileKey{uint64(s.dev), uint64(s.ino)} }

func newDiscovery(t *Tailer) *discovery {
	newWatcher := t.newWatcher
	if newWatcher == nil {
		newWatcher = fsnotify.NewWatcher
	}
	w, err := newWatcher()
	if err != nil {
		// No watcher at all (the inotify instance limit, shared with
		// editors and other watchers): every folder is rescanned, as one
		// that cannot be watched is, rather than no daemon.
		t.logger.Warn("cannot watch any folder; relying on rescans: lines are published within PISYNC_RESCAN_INTERVAL, not at once",
			"err", err, "fix", watchFix(err, true))
		w = nil
	}
	return &discovery{
		t: t, w: w, watched: make(map[string]struct{}), seen: make(map[string]string), walked: make(chan struct{}),
		owner: make(map[fileKey]string), keyOf: make(map[string]fileKey), dups: make(map[string]struct{}),
		unreadable: make(map[string]error), unwatched: make(map[string]error),
	}
}

func (d *discovery) run(ctx context.Context) error {
	// Without a watcher the channels stay nil: never ready.
	var events chan fsnotify.Event
	var errs chan error
	if d.w != nil {
		defer d.w.Close()
		events, errs = d.w.Events, d.w.Errors
	}
	if err := d.walk(); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("watch: the sessions dir %s: %w: this user may not read it; give it read and search permission (chmod u+rx), or point PISYNC_SESSIONS_DIR elsewhere", d.t.root, err)
		}
		return err
	}
	d.found = len(d.seen)
	close(d.walked)
	tick := time.NewTicker(d.t.rescan)
	defer tick.Stop()
	// settle: the walk that confirms deletions, once removals settle
	// (deletions.go); nil while none is asked for.
	settle := time.NewTimer(d.t.dels.settle)
	settle.Stop()
	var settled <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-d.t.dels.soon:
			if settled == nil {
				settle.Reset(d.t.dels.settle)
				settled = settle.C
			}
		case <-settled:
			if wait := d.t.dels.settle - time.Since(time.Unix(0, d.t.dels.removedAt.Load())); wait > 0 {
				settle.Reset(wait) // removals went on
				continue
			}
			settled = nil
			d.rescanned(d.walk())
		case <-tick.C:
			d.rescanned(d.walk())
			// Once a minute: a pass over every session, and a minute is
			// nothing against knownIdle.
			if now := time.Now(); now.Sub(d.swept) >= time.Minute {
				d.t.dropKnown(now.Add(-knownIdle))
				d.swept = now
			}
		case ev, ok := <-events:
			if !ok {
				return errors.New("watch: fsnotify closed")
			}
			if !d.t.hintless {
				d.event(ev)
			}
		case err, ok := <-errs:
			if !ok {
				return errors.New("watch: fsnotify closed")
			}
			// An overflow means events were lost: a full walk finds what
			// changed.
			d.t.logger.Warn("file events lost; rescanning", "err", err)
			d.t.removed() // the events lost may have been removals
			d.walks = 0
			d.rescanned(d.walk())
		}
	}
}

// rescanned logs a walk that failed once for as long as it fails the same
// way, and once when a walk works again: a sessions dir the daemon may not
// read any more (its mode changed) said so at every rescan, 8,640 lines a
// day at the default interval.
func (d *discovery) rescanned(err error) {
	switch {
	case err == nil && d.walkErr != "":
		d.t.logger.Info("rescans work again", "failed_for", time.Since(d.walkErrSince).Round(time.Second))
		d.walkErr = ""
		d.t.rescanErr.Store(nil)
	case err != nil && err.Error() != d.walkErr:
		d.t.logger.Warn("rescan failed; said once until it works again or fails otherwise", "err", err)
		if d.walkErr == "" {
			d.walkErrSince = time.Now()
		}
		d.walkErr = err.Error()
		// In status too: the log said it once, and status showed nothing
		// wrong while no file was found (a disk probe, 2026-12-07).
		msg := d.walkErr
		if errors.Is(err, fs.ErrPermission) {
			msg += ": this user may not read the sessions dir; give it back (chmod u+rx)"
		}
		d.t.rescanErr.Store(&msg)
	}
}

func (d *discovery) event(ev fsnotify.Event) {
	name := ev.Name
	if skipName(filepath.Base(name)) {
		return
	}
	if ev.Has(fsnotify.Create) {
		if st, err := os.Lstat(name); err == nil && d.linkedFolder(name, st.Mode()) {
			d.walkLinked(name)
			return
		} else if err == nil && st.IsDir() {
			// A new --cwd-- folder: watch it, and pick up the files that
			// were created in it before the watch was in place.
			if err := d.walkFrom(name); err != nil {
				d.t.logger.Warn("scan of new folder failed", "dir", name, "err", err)
			}
			return
		}
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		d.t.removed()
		if name == d.t.root {
			d.rootLost = true
		}
		delete(d.watched, name)
		d.release(name)
		if !isSessionFile(name) {
			d.rewatch()
		}
	}
	if isSessionFile(name) && d.claim(name) {
		d.t.submit(name)
	}
}

// claim reports whether path is the one path its file is followed under,
// taking the file for path if no other path holds it. A path that cannot
// be looked at is followed: its worker finds out what it is.
func (d *discovery) claim(path string) bool {
	ok, _, _ := d.claimStat(path)
	return ok
}

// claimStat is claim, and also returns the file's stat, or why it could
// not be taken.
func (d *discovery) claimStat(path string) (bool, fileSig, error) {
	st, err := statSig(path)
	if err != nil {
		return true, st, err
	}
	k := st.key()
	if d.owner[k] == path && d.keyOf[path] == k {
		// Held already: the maps are left as they are. An assignment
		// would put this walk's copy of the path in as their key and
		// value, and make the copy the last walk put there garbage.
		return true, st, nil
	}
	if o, ok := d.owner[k]; ok && o != path {
		if ost, err := statSig(o); err == nil && ost.key() == k {
			d.dups[path] = struct{}{}
			d.t.aliases.add(path)
			return false, st, nil
		}
		d.release(o) // the owner is gone or another file now
	}
	if old, ok := d.keyOf[path]; ok && old != k {
		d.release(path)
	}
	d.owner[k], d.keyOf[path] = path, k
	return true, st, nil
}

// release lets go of what path held.
func (d *discovery) release(path string) {
	if k, ok := d.keyOf[path]; ok {
		if d.owner[k] == path {
			delete(d.owner, k)
		}
		delete(d.keyOf, path)
	}
}

// walk scans the whole tree, submits every session file, and submits files
// seen before that are gone now (their workers notice the deletion).
func (d *discovery) walk() error {
	gen, start := d.t.dels.walkGen.Add(1), time.Now()
	if d.rootAway() {
		return nil
	}
	d.t.rescans.Add(1)
	d.warnSlow()
	d.full = d.walks%statEvery == 0
	d.walks++
	prev := d.seen
	if d.spare == nil {
		d.spare = make(map[string]string, len(prev))
	}
	d.seen, d.spare = d.spare, nil
	d.dups = make(map[string]struct{})
	d.walkUnreadable, d.walkUnwatched = make(map[string]error), make(map[string]error)
	d.reading = make(map[string]*dirState, len(d.dirs))
	d.prev = prev
	err := d.walkFrom(d.t.root)
	d.dirs, d.reading, d.prev = d.reading, nil, nil
	if err != nil {
		return err
	}
	if len(d.seen) == 0 && len(prev) >= 2 {
		// Every file gone at once: a sessions dir whose file system
		// went (unmounted), not a user deleting every session. Nothing
		// is taken for deleted until a session file shows up again
		// (then the rest are, unless the sessions dir is another
		// folder by then: below). A single file going is a deletion:
		// pi's last session removed. Removals fsnotify reported wait
		// for a walk like this one (deletions.go).
		d.seen, d.spare = prev, d.seen
		d.away("no session file left in it")
		return nil
	}
	d.back()
	// The sessions dir another folder than at the last walk that got
	// here (a link to it repointed; removed and made again; a file
	// system mounted on it): the sessions not in it are elsewhere, not
	// deleted, as when it is away. A folder made again at once may get
	// the inode number of the one removed, so a sessions dir seen gone
	// (rootLost) is another folder too.
	key, keyed := rootKey(d.t.root)
	replaced := keyed && (d.rootLost || d.rootKey != (fileKey{}) && key != d.rootKey)
	d.rootLost = false
	elsewhere := 0
	for p := range prev {
		if _, ok := d.seen[p]; !ok {
			if replaced {
				d.t.Forget(p)
				elsewhere++
			}
			d.t.submit(p)
		}
	}
	if elsewhere > 0 {
		d.t.logger.Warn("the sessions dir is another folder now; the sessions not in it are not taken for deleted",
			"dir", d.t.root, "sessions_not_in_it", elsewhere)
	}
	if keyed {
		d.rootKey = key
	}
	clear(prev)
	d.spare = prev
	if d.t.removalsSettled(start) {
		d.t.confirmDeletions(gen)
	}
	// Paths not seen any more hold no file.
	for p := range d.keyOf {
		if _, ok := d.seen[p]; !ok {
			d.release(p)
		}
	}
	d.t.duplicatePaths.Store(int64(len(d.dups)))
	d.t.aliases.set(d.dups)
	d.report()
	return nil
}

// report logs a folder that became unreadable (or could not be watched)
// once, and once again when it recovered, instead of at every walk.
func (d *discovery) report() {
	for dir, err := range d.walkUnreadable {
		if _, ok := d.unreadable[dir]; !ok {
			d.t.logger.Warn("folder not readable; its sessions are not followed until it is", "dir", dir, "err", err)
		}
		delete(d.walkUnwatched, dir) // one message for one folder
	}
	for dir := range d.unreadable {
		if _, ok := d.walkUnreadable[dir]; !ok {
			if _, err := os.Stat(dir); err == nil {
				d.t.logger.Info("folder readable again", "dir", dir)
			}
		}
	}
	var lost, back []string
	for dir := range d.walkUnwatched {
		if _, ok := d.unwatched[dir]; !ok {
			lost = append(lost, dir)
		}
	}
	for dir := range d.unwatched {
		if _, ok := d.walkUnwatched[dir]; !ok {
			if _, ok := d.watched[dir]; ok {
				back = append(back, dir)
			}
		}
	}
	sayFolders(d.t.logger, slog.LevelWarn, "cannot watch folder; relying on rescans", "cannot watch folders; relying on rescans", lost,
		func(dir string) []any {
			return []any{"err", d.walkUnwatched[dir], "fix", watchFix(d.walkUnwatched[dir], false)}
		})
	sayFolders(d.t.logger, slog.LevelInfo, "folder watched again", "folders watched again", back, nil)
	// Copies: events until the next walk add to the walk's maps, and
	// what they add must still count as new then.
	d.unreadable, d.unwatched = maps.Clone(d.walkUnreadable), maps.Clone(d.walkUnwatched)
	d.t.unreadableDirs.Store(int64(len(d.unreadable)))
	d.t.unwatchedDirs.Store(int64(len(d.unwatched)))
}

// sayFolders logs msg for each of dirs while they are few (with attrs of
// each, if any), and past reportEach one line of many for all of them, with
// the first's attrs: a watch limit reached made a line for each of hundreds
// of folders, all saying the same thing.
func sayFolders(logger *slog.Logger, level slog.Level, one, many string, dirs []string, attrs func(dir string) []any) {
	if len(dirs) == 0 {
		return
	}
	slices.Sort(dirs)
	with := func(dir string, args ...any) []any {
		if attrs != nil {
			args = append(args, attrs(dir)...)
		}
		return args
	}
	if len(dirs) <= reportEach {
		for _, dir := range dirs {
			logger.Log(context.Background(), level, one, with(dir, "dir", dir)...)
		}
		return
	}
	logger.Log(context.Background(), level, many, with(dirs[0], "folders", len(dirs), "first", dirs[0])...)
}

// rootAway reports whether the sessions dir itself is gone (moved away,
// or a link to a file system not mounted), and says so once.
func (d *discovery) rootAway() bool {
	if d.t.rootGone() {
		d.rootLost = true
		d.away("the folder is gone")
		return true
	}
	return false
}

// away marks the sessions dir away: its files are not taken for deleted
// (a folder moved away a moment by a backup tool, or a file system not
// mounted, would have every session published deleted, and trashed on
// every other machine). back ends it.
func (d *discovery) away(why string) {
	if !d.t.away.Swap(true) {
		d.t.logger.Warn("the sessions dir is away: no session is taken for deleted until it is back", "dir", d.t.root, "why", why)
	}
}

func (d *discovery) back() {
	if d.t.away.Swap(false) {
		d.t.logger.Info("the sessions dir is back", "dir", d.t.root)
	}
}

func (d *discovery) walkFrom(dir string) error {
	// WalkDir reports a symlinked start folder without entering it; with
	// a trailing separator the system resolves the link (a sessions dir
	// that is itself a link).
	start := dir
	if st, err := os.Lstat(dir); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		start = dir + string(filepath.Separator)
	}
	return filepath.WalkDir(start, func(path string, de fs.DirEntry, err error) error {
		if path == start {
			path = dir
		}
		if err == nil && de.Type()&fs.ModeSymlink != 0 && filepath.Dir(path) == d.t.root {
			// A linked project folder another user made is not followed
			// (owner.go): it would lead the daemon into folders of this
			// user's that they cannot read; nor is any link in a
			// sessions dir other users may write, where one could be
			// swapped for another after its check (exposed.go).
			why := foreignLink(path)
			if ex := d.t.exposed(path); why == "" && ex != "" {
				why = "a link in a folder other users may write (" + ex + ")"
			}
			if why != "" {
				d.walkUnreadable[path] = errors.New(why + ": not followed; only this user's links are (chmod o-w the sessions dir)")
				return nil
			}
		}
		if err == nil && d.linkedFolder(path, de.Type()) {
			if d.reading != nil {
				if ds := d.reading[filepath.Dir(path)]; ds != nil {
					ds.subdirs = true // its files are not taken from here
				}
			}
			d.walkLinked(path)
			return nil
		}
		if err == nil && linkAway(d.t.root, path, de.Type()) {
			// A linked project folder whose target is not there (a
			// drive not mounted): its sessions are not followed, and it
			// is counted as a folder not readable, so that they are not
			// taken for deleted at start (deletedWhileStopped).
			d.walkUnreadable[path] = errors.New("a link to a folder that is not there")
			return nil
		}
		if err != nil {
			if d.reading != nil {
				delete(d.reading, path) // not read: read it again next time
			}
			if path == dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil // vanished while walking
			}
			if path != d.t.root {
				// Not ours to read (permission), or not readable at all
				// (a path longer than the system takes, an I/O error):
				// said once, and the rest of the tree is walked. Were it
				// the walk's end, one such folder would stop every
				// rescan, and the daemon at start.
				d.walkUnreadable[path] = err
				return nil
			}
			return err
		}
		if de.IsDir() {
			if d.reading != nil && path != dir {
				if ds := d.reading[filepath.Dir(path)]; ds != nil {
					ds.subdirs = true
				}
			}
			if path != d.t.root && skipName(de.Name()) {
				return filepath.SkipDir
			}
			d.watch(path)
			if d.reading != nil && d.passOver(path) {
				return filepath.SkipDir
			}
			return nil
		}
		if !isSessionFile(path) {
			return nil
		}
		path = d.keep(path)
		if d.reading != nil {
			if ds := d.reading[filepath.Dir(path)]; ds != nil {
				ds.files = append(ds.files, path)
			}
		}
		d.found1(path)
		return nil
	})
}

// passOver is called by a walk for each folder before it is read: it
// records the folder's stat, and, in a walk that is not full, takes the
// files of a watched folder without subfolders whose stat did not change
// from what the last walk found in it, and reports that the folder need
// not be read.
func (d *discovery) passOver(dir string) bool {
	sig, err := statSig(dir)
	if err != nil {
		return false // the read says what is wrong
	}
	if prev := d.dirs[dir]; prev != nil && !d.full && !prev.subdirs && prev.sig == sig {
		if _, ok := d.watched[dir]; ok {
			d.reading[dir] = prev
			for _, p := range prev.files {
				d.found1(p)
			}
			return true
		}
	}
	d.reading[dir] = &dirState{sig: sig}
	return false
}

// keep returns the string the last walk kept for path, if it found path
// too. Each walk of the whole tree (once a minute) makes every path anew
// (filepath.Join); keeping the new strings made 10,000 long-lived strings
// a minute among the walk's garbage, a second copy of each path beside the
// one the file's record holds, and pages of the heap that stay in use for
// a few of them (docs/PERFORMANCE.md, "Whose objects the first read's
// extra room is in"). The fresh string is garbage at once instead.
func (d *discovery) keep(path string) string {
	if kept, ok := d.prev[path]; ok {
		return kept
	}
	return path
}

// found1 takes a session file the walk came across.
func (d *discovery) found1(path string) {
	if !d.full && d.quiet(path) {
		d.seen[path] = path
		return
	}
	ok, st, err := d.claimStat(path)
	if !ok {
		return
	}
	d.seen[path] = path
	if err == nil && d.t.isSettled(path, st) {
		return // its worker handled exactly this (settled.go)
	}
	d.t.submit(path)
}

// quiet reports whether a walk that is not full may pass over path
// without a stat (statEvery): the file is the one its path holds (claimed
// by it, so not a second link to a file followed under another path), its
// worker settled it, and its folder is watched.
func (d *discovery) quiet(path string) bool {
	if _, ok := d.keyOf[path]; !ok {
		return false
	}
	if _, ok := d.watched[filepath.Dir(path)]; !ok {
		return false
	}
	return d.t.hasSettled(path)
}

// rewatch watches again each folder fsnotify stopped watching on its own.
// A folder that moves keeps its inotify watch (one per folder), and the
// Create of its new name has walkFrom ask for it under that name; but
// fsnotify drops the watch when the move reaches it, and if that comes
// after, it drops the one just asked for, while its event names the old
// name. Lines appended in the moved folder then waited for a walk, up to
// statEvery walks (a minute). Called on the removal or move of anything
// but a session file, rare enough for a look at every watch.
func (d *discovery) rewatch() {
	if d.w == nil {
		return
	}
	live := map[string]struct{}{}
	for _, p := range d.w.WatchList() {
		live[p] = struct{}{}
	}
	var lost []string
	for dir := range d.watched {
		if _, ok := live[dir]; !ok {
			lost = append(lost, dir)
		}
	}
	for _, dir := range lost {
		delete(d.watched, dir)
		if st, err := os.Lstat(dir); err == nil && st.IsDir() {
			if err := d.walkFrom(dir); err != nil {
				d.t.logger.Warn("scan of moved folder failed", "dir", dir, "err", err)
			}
		}
	}
}

func (d *discovery) watch(dir string) {
	if _, ok := d.watched[dir]; ok {
		return
	}
	if d.w == nil {
		d.walkUnwatched[dir] = errNoWatcher
		return
	}
	if err := d.w.Add(dir); err != nil {
		d.walkUnwatched[dir] = err
		return
	}
	d.watched[dir] = struct{}{}
}

// walkLinked takes the session files directly in a linked project folder,
// as pi lists them (one level, spec §1): no folder below it and no link in
// it is followed, so a link to an ancestor of the sessions dir, or to
// itself, cannot make the walk go round; and a file already followed
// under another path (two links to one folder) is passed over by claim.
func (d *discovery) walkLinked(link string) {
	entries, err := os.ReadDir(link)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			d.walkUnreadable[link] = err
		}
		return
	}
	d.watch(link)
	for _, e := range entries {
		if !e.IsDir() && isSessionFile(e.Name()) {
			d.found1(d.keep(filepath.Join(link, e.Name())))
		}
	}
}

// linkedFolder reports whether path is a symbolic link, directly in the
// sessions dir, to a folder outside it. pi lists the sessions of such
// linked project folders (spec §1, since 0.84), so pisyncd follows them;
// links deeper down, or to folders inside the root whose files are found
// under their own names anyway, are not followed.
func (d *discovery) linkedFolder(path string, mode fs.FileMode) bool {
	if mode&fs.ModeSymlink == 0 || filepath.Dir(path) != d.t.root || skipName(filepath.Base(path)) {
		return false
	}
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return false
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	realRoot, err := filepath.EvalSymlinks(d.t.root)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(realRoot, real)
	return err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// linkAway reports whether path, of mode, is a link directly in the
// sessions dir root, not named as a session file, whose target does not
// exist: a linked project folder (linkedFolder) that is away.
func linkAway(root, path string, mode fs.FileMode) bool {
	if mode&fs.ModeSymlink == 0 || filepath.Dir(path) != root || skipName(filepath.Base(path)) || isSessionFile(path) {
		return false
	}
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// skipName leaves out hidden entries: pisyncd's own staging files and trash
// folder live under dot names inside the sessions dir.
func skipName(name string) bool { return strings.HasPrefix(name, ".") }

// isSessionFile: pi discovers sessions by the .jsonl suffix only.
func isSessionFile(path string) bool {
	base := filepath.Base(path)
	return strings.HasSuffix(base, ".jsonl") && !skipName(base)
}

// dirAway reports whether the folder of path is away, so that its file
// not found is no deletion: the sessions dir, so marked by the last walk or
// gone now (a worker may see a file go before the next walk), or the
// linked project folder path is in, its link there and its target not.
func (t *Tailer) dirAway(path string) bool {
	if t.away.Load() || t.rootGone() {
		return true
	}
	dir := filepath.Dir(path)
	st, err := os.Lstat(dir)
	return err == nil && linkAway(t.root, dir, st.Mode())
}

// rootKey is the identity of the folder the sessions dir is now (through a
// link).
func rootKey(root string) (fileKey, bool) {
	st, err := statSig(root)
	return st.key(), err == nil
}

// rootGone reports whether the sessions dir itself is not there now.
func (t *Tailer) rootGone() bool {
	_, err := os.Stat(t.root)
	return errors.Is(err, fs.ErrNotExist)
}
