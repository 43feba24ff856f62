package watch

import (
	"errors"
	"fmt"
	"os"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// ErrRootInUse is LockRoot's error when another tailer holds the sessions
// dir.
var ErrRootInUse = errors.New("followed by another pisyncd")

// ErrLockedByOther is LockRoot's error when a process of another user
// holds the lock on the sessions dir: not a pisyncd of this user's, so the
// daemon goes on, unguarded against a second one of its own.
var ErrLockedByOther = errors.New("locked by another user")

// RootLock is an exclusive flock on the sessions dir (fsutil.TryLock): two
// daemons over one sessions dir, each with its own state dir and node id,
// would each find every line new and publish it, every session twice
// under two nodes. The lock is on the folder itself, opened read-only, so
// nothing is written into pi's folder.
type RootLock struct {
	f *os.File
}

// LockRoot takes the lock on root, making the folder (0700) when missing.
func LockRoot(root string) (*RootLock, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("watch: sessions dir: %w", err)
	}
	f, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("watch: sessions dir: %w", err)
	}
	if err := fsutil.TryLock(f); err != nil {
		defer f.Close()
		if errors.Is(err, fsutil.ErrLocked) {
			// Whoever may open the folder may lock it: another user of
			// the machine (pi makes it 0755) kept every pisyncd of this
			// user from starting so. A lock held by another user's
			// process is no pisyncd of this user's: go on without one.
			if pid, uid, ok := lockHolder(f); ok && uid != os.Geteuid() {
				return nil, fmt.Errorf("watch: sessions dir %s is locked by process %d of another user (uid %d), no pisyncd of yours: %w", root, pid, uid, ErrLockedByOther)
			}
			return nil, fmt.Errorf("watch: sessions dir %s: %w", root, ErrRootInUse)
		}
		return nil, fmt.Errorf("watch: %w", err)
	}
	return &RootLock{f: f}, nil
}

// Close drops the lock.
func (l *RootLock) Close() error { return fsutil.Unlock(l.f) }
