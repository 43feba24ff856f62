package watch

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// movedTo looks for the file f was under another path in pi's layout, a
// project folder of the sessions dir: a *.jsonl named as f was, or naming
// its session, that is f's inode. A file moved by hand into a folder made
// for it just before (mkdir, then mv) goes from its old path before the
// new folder is watched, and so looked like a deletion: every other
// machine moved its copy to the trash and then passed over the lines that
// followed. It reads the folders' names, and stats only files so named;
// it runs only when a session's last file goes.
func (t *Tailer) movedTo(f *file) string {
	base := filepath.Base(f.path)
	dirs, err := os.ReadDir(t.root)
	if err != nil {
		return ""
	}
	look := func(dir string) string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return ""
		}
		for _, e := range ents {
			name := e.Name()
			if !strings.HasSuffix(name, ".jsonl") || name != base && !strings.Contains(name, f.sid) {
				continue
			}
			p := filepath.Join(dir, name)
			st, err := os.Lstat(p)
			if p == f.path || err != nil || !st.Mode().IsRegular() {
				continue
			}
			if dev, ino := devIno(st); dev == f.dev && ino == f.ino {
				return p
			}
		}
		return ""
	}
	if p := look(t.root); p != "" {
		return p
	}
	for _, d := range dirs {
		if strings.HasPrefix(d.Name(), ".") || !d.IsDir() && d.Type()&fs.ModeSymlink == 0 {
			continue // the trash, pisyncd's own folders; files
		}
		if p := look(filepath.Join(t.root, d.Name())); p != "" {
			return p
		}
	}
	return ""
}
