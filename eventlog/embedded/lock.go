package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// InUseError reports that another process holds the state dir lock.
type InUseError struct {
	Dir string
	PID int // 0 when the holder's pid could not be read
}

func (e *InUseError) Error() string {
	pid := "unknown"
	if e.PID > 0 {
		pid = strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("state dir %s is in use by another pisyncd (pid %s)", e.Dir, pid)
}

// dirLock is an exclusive flock on StateDir/lock (fsutil.TryLock: a
// second Start in the same process conflicts too, and a crash leaves no
// stale lock).
type dirLock struct {
	f *os.File
}

func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := fsutil.TryLock(f); err != nil {
		f.Close()
		if errors.Is(err, fsutil.ErrLocked) {
			return nil, &InUseError{Dir: dir, PID: readPID(path)}
		}
		return nil, err
	}
	// The pid is only for the message above; the lock itself is the flock.
	if err := f.Truncate(0); err != nil {
		fsutil.Unlock(f)
		return nil, fmt.Errorf("lock: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		fsutil.Unlock(f)
		return nil, fmt.Errorf("lock: %w", err)
	}
	return &dirLock{f: f}, nil
}

// release drops the lock. The file stays: removing it would let a third
// process lock a new inode while a second still waits on the old one.
func (l *dirLock) release() error {
	if err := fsutil.Unlock(l.f); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// StateDirInUse reports whether another process holds dir's lock, without
// creating anything: nil when no state dir or lock file is there, or
// nobody holds it.
func StateDirInUse(dir string) *InUseError {
	path := filepath.Join(dir, "lock")
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if err := fsutil.TryLock(f); err != nil {
		if errors.Is(err, fsutil.ErrLocked) {
			return &InUseError{Dir: dir, PID: readPID(path)}
		}
		return nil
	}
	fsutil.Unlock(f)
	return nil
}
