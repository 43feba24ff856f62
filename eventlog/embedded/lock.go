package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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

// dirLock is an exclusive flock on StateDir/lock. flock rather than fcntl
// locks because flock belongs to the open file description: a second Start
// in the same process conflicts too (fcntl locks are per process and would
// not), and the kernel drops it when the process dies, so a crash never
// leaves a stale lock behind.
type dirLock struct {
	f *os.File
}

func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &InUseError{Dir: dir, PID: readPID(path)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The pid is only for the message above; the lock itself is the flock.
	if err := f.Truncate(0); err != nil {
		unlock(f)
		return nil, fmt.Errorf("lock: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		unlock(f)
		return nil, fmt.Errorf("lock: %w", err)
	}
	return &dirLock{f: f}, nil
}

// release drops the lock. The file stays: removing it would let a third
// process lock a new inode while a second still waits on the old one.
func (l *dirLock) release() error {
	if err := unlock(l.f); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

func unlock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
