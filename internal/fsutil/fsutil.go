// Package fsutil holds the file-system habits pisyncd keeps everywhere it
// writes its own files, the one lock it takes on a file or a folder, and
// how it reads a file a setting names (ReadSetting).
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFileAtomic writes data to path with mode 0600 through a temp file,
// fsync and rename, so a crash leaves the old file or the new, never half.
func WriteFileAtomic(path string, data []byte) error {
	return writeAtomic(path, data, false)
}

// ReplaceFileKeepOwner is WriteFileAtomic for a file a service running as
// another user reads: what it replaces keeps its owner and group, and a
// new file, run as root, takes its folder's. A file an operator renews as
// root (a hub's TLS key, 0600), or a node registered with sudo into the
// hub's state dir, must stay readable by the service's own user, or the
// service cannot load it at its next reload or start. A process that
// cannot give a file it replaces back to its owner (not root) writes
// nothing and says so.
func ReplaceFileKeepOwner(path string, data []byte) error {
	return writeAtomic(path, data, true)
}

// MkdirAllKeepOwner is os.MkdirAll with mode 0700 where each folder it
// makes, run as root, takes the owner of the folder it is made in, as
// ReplaceFileKeepOwner's new files do.
func MkdirAllKeepOwner(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := MkdirAllKeepOwner(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // made meanwhile
		}
		return err
	}
	if o, ok := folderOwner(filepath.Dir(dir)); ok {
		return os.Lchown(dir, o.uid, o.gid)
	}
	return nil
}

func writeAtomic(path string, data []byte, keepOwner bool) error {
	owner, hasOwner, err := ownerToKeep(path, keepOwner)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*") // created 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if hasOwner {
		if err := f.Chown(owner.uid, owner.gid); err != nil {
			f.Close()
			return fmt.Errorf("%s belongs to uid %d, gid %d, and this process (uid %d) cannot give its replacement back to them: %w; run this as that user or as root", path, owner.uid, owner.gid, os.Geteuid(), err)
		}
	}
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

type fileOwner struct{ uid, gid int }

// ownerToKeep returns who the file written at path is to belong to when
// keep is set, if not this process: the owner of the file it replaces,
// or for a new file, when running as root, its folder's. Checked before
// anything is written, so that a refusal leaves no file half-renewed.
func ownerToKeep(path string, keep bool) (fileOwner, bool, error) {
	if !keep {
		return fileOwner{}, false, nil
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		o, ok := folderOwner(filepath.Dir(path))
		return o, ok, nil
	}
	if err != nil {
		return fileOwner{}, false, err
	}
	o, ok := ownerOf(fi)
	if !ok || o.uid == os.Geteuid() && o.gid == os.Getegid() {
		return fileOwner{}, false, nil
	}
	if os.Geteuid() != 0 && o.uid != os.Geteuid() {
		return fileOwner{}, false, fmt.Errorf("%s belongs to uid %d and this process runs as uid %d, so its replacement would not be theirs (a service running as them could no longer read it): run this as that user (sudo -u) or as root", path, o.uid, os.Geteuid())
	}
	return o, true, nil
}

// folderOwner is the owner of folder dir, when this process runs as root
// and it is another: what root makes in it is given to them. Another
// user's new files stay theirs (a folder such as /tmp is root's).
func folderOwner(dir string) (fileOwner, bool) {
	if os.Geteuid() != 0 {
		return fileOwner{}, false
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fileOwner{}, false
	}
	o, ok := ownerOf(fi)
	if !ok || o.uid == 0 {
		return fileOwner{}, false
	}
	return o, true
}

func ownerOf(fi fs.FileInfo) (fileOwner, bool) {
	uid, gid, ok := Owner(fi)
	return fileOwner{uid: uid, gid: gid}, ok
}

// Owner is the user and group fi belongs to, where the system says.
func Owner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
