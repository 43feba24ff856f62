package embedded

import (
	"errors"
	"fmt"
	"io/fs"
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
	// Holder is the command that holds it when that is not a daemon (a
	// command that reads the store while none runs: "pisyncd events");
	// "" for a daemon.
	Holder string
}

// PIDText is the holder's pid, or "unknown" when it could not be read.
func (e *InUseError) PIDText() string {
	if e.PID > 0 {
		return strconv.Itoa(e.PID)
	}
	return "unknown"
}

func (e *InUseError) Error() string {
	pid := e.PIDText()
	if e.Holder != "" {
		return fmt.Sprintf("state dir %s is in use by `%s` (pid %s), which reads the store while the daemon is stopped: let it end (quit its pager), then try again", e.Dir, e.Holder, pid)
	}
	return fmt.Sprintf("state dir %s is in use by another pisyncd (pid %s)", e.Dir, pid)
}

// dirLock is an exclusive flock on StateDir/lock (fsutil.TryLock: a
// second Start in the same process conflicts too, and a crash leaves no
// stale lock).
type dirLock struct {
	f *os.File
}

// lockDir takes dir's lock for holder ("" for a daemon; see InUseError).
func lockDir(dir, holder string) (*dirLock, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		if own := fsutil.OwnFolderHint(err); own != "" {
			return nil, fmt.Errorf("lock: %w: %s", err, own)
		}
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("lock: %w: it is not this user's to write: run this as the daemon's user, or set PISYNC_STATE_DIR to a folder of this user's", err)
		}
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := fsutil.TryLock(f); err != nil {
		f.Close()
		if errors.Is(err, fsutil.ErrLocked) {
			return nil, inUseBy(dir, path)
		}
		return nil, err
	}
	// The pid and holder are only for the message above; the lock itself
	// is the flock. A daemon writes its pid alone, as before holders were
	// written, so that an older pisyncd reads it.
	line := strconv.Itoa(os.Getpid())
	if holder != "" {
		line += " " + holder
	}
	if err := f.Truncate(0); err != nil {
		fsutil.Unlock(f)
		return nil, fmt.Errorf("lock: %w", err)
	}
	if _, err := f.WriteAt([]byte(line+"\n"), 0); err != nil {
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

// inUseBy reads the holder of the lock file at path, as lockDir wrote it.
func inUseBy(dir, path string) *InUseError {
	e := &InUseError{Dir: dir}
	b, err := os.ReadFile(path)
	if err != nil {
		return e
	}
	pid, holder, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if n, err := strconv.Atoi(pid); err == nil {
		e.PID, e.Holder = n, holder
	}
	return e
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
			return inUseBy(dir, path)
		}
		return nil
	}
	fsutil.Unlock(f)
	return nil
}
