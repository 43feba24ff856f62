package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// In a folder other users may write (pi makes its folders with the user's
// umask: 0777 under umask 000), a link checked before the open, or a file
// checked after it, proves nothing: the other user swaps a link to this
// user's private file in and out of a name (rename(2) with
// RENAME_EXCHANGE, hundreds of thousands of times a second), and the open
// followed it between two looks. A local probe on 2026-12-07 had a 0600
// file of the user's published so, catalog and search index included, in
// 20 s. So where any folder from the sessions dir down to a file's is
// writable by others, the file is opened without following a link at any
// step: a link there is left alone, whoever made it.

// exposed says which folder on path's way from the sessions dir (the
// sessions dir included) other users may write, and how ("": none).
func (t *Tailer) exposed(path string) string {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if st, err := os.Stat(dir); err == nil {
			if why := othersMayWrite(st); why != "" {
				return fmt.Sprintf("%s is %s", dir, why)
			}
		}
		if dir == t.root || !strings.HasPrefix(dir, t.root+string(filepath.Separator)) {
			return ""
		}
	}
}

// errLinkExposed is a link met on the way to a file opened without
// following links (openNoFollow).
var errLinkExposed = errors.New("a link in a folder other users may write: not followed")

// openNoFollow opens path, which lies under root, for reading without
// blocking and without following a link at any step below root: each
// folder is opened relative to the one before it.
func openNoFollow(root, path string) (*os.File, error) {
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("%s is not under %s", path, root)
	}
	dfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	names := strings.Split(rel, string(filepath.Separator))
	for _, name := range names[:len(names)-1] {
		next, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dfd)
		if err != nil {
			return nil, noFollowErr(path, err)
		}
		dfd = next
	}
	fd, err := unix.Openat(dfd, names[len(names)-1], unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	if err != nil {
		return nil, noFollowErr(path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// noFollowErr is the error of a step of openNoFollow: a link met (ELOOP;
// EMLINK on the BSDs) is errLinkExposed.
func noFollowErr(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK) {
		return fmt.Errorf("%s: %w", path, errLinkExposed)
	}
	return &fs.PathError{Op: "open", Path: path, Err: err}
}
