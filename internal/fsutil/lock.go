package fsutil

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrLocked is TryLock's error when another open file holds the lock.
var ErrLocked = errors.New("held by another process")

// TryLock takes an exclusive flock on f without waiting. flock rather than
// fcntl locks because flock belongs to the open file description: a second
// lock in the same process conflicts too (fcntl locks are per process and
// would not), and the kernel drops it when the process dies, so a crash
// never leaves a stale lock behind. It works on a folder opened read-only
// as on a file.
func TryLock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("lock %s: %w", f.Name(), ErrLocked)
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return nil
}

// Unlock drops the lock TryLock took and closes f.
func Unlock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return errors.Join(err, f.Close())
}
