package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// discovery finds session files: fsnotify for speed, a periodic walk of the
// whole tree for truth (events can be dropped, watches can be missing for a
// folder created between two events, and some file systems send none).
type discovery struct {
	t       *Tailer
	w       *fsnotify.Watcher
	watched map[string]struct{}
	seen    map[string]struct{} // *.jsonl paths found by the last walk
	walked  chan struct{}       // closed after the first walk
	found   int                 // session files the first walk found; read after walked

}

func newDiscovery(t *Tailer) (*discovery, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch: fsnotify: %w", err)
	}
	return &discovery{t: t, w: w, watched: make(map[string]struct{}), seen: make(map[string]struct{}), walked: make(chan struct{})}, nil
}

func (d *discovery) run(ctx context.Context) error {
	defer d.w.Close()
	if err := d.walk(); err != nil {
		return err
	}
	d.found = len(d.seen)
	close(d.walked)
	tick := time.NewTicker(d.t.rescan)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
			if err := d.walk(); err != nil {
				d.t.logger.Warn("rescan failed", "err", err)
			}
		case ev, ok := <-d.w.Events:
			if !ok {
				return errors.New("watch: fsnotify closed")
			}
			d.event(ev)
		case err, ok := <-d.w.Errors:
			if !ok {
				return errors.New("watch: fsnotify closed")
			}
			// An overflow means events were lost: the walk finds what changed.
			d.t.logger.Warn("file events lost; rescanning", "err", err)
			if err := d.walk(); err != nil {
				d.t.logger.Warn("rescan failed", "err", err)
			}
		}
	}
}

func (d *discovery) event(ev fsnotify.Event) {
	name := ev.Name
	if skipName(filepath.Base(name)) {
		return
	}
	if ev.Has(fsnotify.Create) {
		if st, err := os.Lstat(name); err == nil && (st.IsDir() || d.linkedFolder(name, st.Mode())) {
			// A new --cwd-- folder: watch it, and pick up the files that
			// were created in it before the watch was in place.
			if err := d.walkFrom(name); err != nil {
				d.t.logger.Warn("scan of new folder failed", "dir", name, "err", err)
			}
			return
		}
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		if _, ok := d.watched[name]; ok {
			delete(d.watched, name)
		}
	}
	if isSessionFile(name) {
		d.t.submit(name)
	}
}

// walk scans the whole tree, submits every session file, and submits files
// seen before that are gone now (their workers notice the deletion).
func (d *discovery) walk() error {
	d.t.rescans.Add(1)
	prev := d.seen
	d.seen = make(map[string]struct{}, len(prev))
	if err := d.walkFrom(d.t.root); err != nil {
		return err
	}
	for p := range prev {
		if _, ok := d.seen[p]; !ok {
			d.t.submit(p)
		}
	}
	return nil
}

func (d *discovery) walkFrom(dir string) error {
	// WalkDir reports a symlinked start folder without entering it; with
	// a trailing separator the system resolves the link (a sessions dir
	// that is itself a link, or a linked project folder).
	start := dir
	if st, err := os.Lstat(dir); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		start = dir + string(filepath.Separator)
	}
	return filepath.WalkDir(start, func(path string, de fs.DirEntry, err error) error {
		if path == start {
			path = dir
		}
		if err == nil && d.linkedFolder(path, de.Type()) {
			return d.walkFrom(path)
		}
		if err != nil {
			if path == dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return nil // vanished while walking, or not ours to read
			}
			return err
		}
		if de.IsDir() {
			if path != d.t.root && skipName(de.Name()) {
				return filepath.SkipDir
			}
			if _, ok := d.watched[path]; !ok {
				if err := d.w.Add(path); err != nil {
					d.t.logger.Warn("cannot watch folder; relying on rescans", "dir", path, "err", err)
				} else {
					d.watched[path] = struct{}{}
				}
			}
			return nil
		}
		if isSessionFile(path) {
			d.seen[path] = struct{}{}
			d.t.submit(path)
		}
		return nil
	})
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

// skipName leaves out hidden entries: pisyncd's own staging files and trash
// folder live under dot names inside the sessions dir.
func skipName(name string) bool { return strings.HasPrefix(name, ".") }

// isSessionFile: pi discovers sessions by the .jsonl suffix only.
func isSessionFile(path string) bool {
	base := filepath.Base(path)
	return strings.HasSuffix(base, ".jsonl") && !skipName(base)
}
