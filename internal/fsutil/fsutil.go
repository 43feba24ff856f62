// Package fsutil holds the file-system habits pisyncd keeps everywhere it
// writes its own files, and the one lock it takes on a file or a folder.
package fsutil

import (
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path with mode 0600 through a temp file,
// fsync and rename, so a crash leaves the old file or the new, never half.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*") // created 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
