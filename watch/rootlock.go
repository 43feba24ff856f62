package watch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// ErrRootInUse is LockRoot's error when another tailer holds the sessions
// dir.
var ErrRootInUse = errors.New("followed by another pisyncd")

// RootInUseError is LockRoot's error when another tailer holds the
// sessions dir: its process, when known (PID 0: not).
type RootInUseError struct {
	Root string
	PID  int
}

func (e *RootInUseError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("watch: sessions dir %s: %v (process %d)", e.Root, ErrRootInUse, e.PID)
	}
	return fmt.Sprintf("watch: sessions dir %s: %v", e.Root, ErrRootInUse)
}

func (e *RootInUseError) Is(target error) bool { return target == ErrRootInUse }

// ErrSessionsDir is LockRoot's error when the sessions dir is missing and
// cannot be made: no daemon can follow it.
var ErrSessionsDir = errors.New("sessions dir cannot be made")

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
	root string
	mu   sync.Mutex
	f    *os.File // the folder locked: the sessions dir when it was last looked at
}

// LockRoot takes the lock on root, making the folder (0700) when missing.
func LockRoot(root string) (*RootLock, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("watch: %w: %w", ErrSessionsDir, err)
	}
	f, err := lockDir(root)
	if err != nil {
		return nil, err
	}
	return &RootLock{root: root, f: f}, nil
}

// lockDir opens the folder root and takes its lock.
func lockDir(root string) (*os.File, error) {
	f, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("watch: sessions dir: %w", err) // the tailer says how to mend it
	}
	if err := fsutil.TryLock(f); err != nil {
		defer f.Close()
		if errors.Is(err, fsutil.ErrLocked) {
			// Whoever may open the folder may lock it: another user of
			// the machine (pi makes it 0755) kept every pisyncd of this
			// user from starting so. A lock held by another user's
			// process is no pisyncd of this user's: go on without one.
			pid, uid, ok := lockHolder(f)
			if ok && uid != os.Geteuid() {
				return nil, fmt.Errorf("watch: sessions dir %s is locked by process %d of another user (uid %d), no pisyncd of yours: %w", root, pid, uid, ErrLockedByOther)
			}
			if !ok {
				pid = 0
			}
			return nil, &RootInUseError{Root: root, PID: pid}
		}
		return nil, fmt.Errorf("watch: %w", err)
	}
	return f, nil
}

// RootHolder reports the process of this user's that holds the lock on
// root, without taking it (a lock taken even for a moment could refuse a
// daemon starting then): where locks are listed (/proc/locks), else
// nothing is reported.
func RootHolder(root string) (pid int, ok bool) {
	f, err := os.Open(root)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	pid, uid, ok := lockHolder(f)
	return pid, ok && uid == os.Geteuid()
}

// Close drops the lock.
func (l *RootLock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fsutil.Unlock(l.f)
}

// Run keeps the lock on the sessions dir as it is now, looking every
// interval: the lock is on the folder, so one deleted and made again (rm
// -rf, a restore from a backup) is unlocked, and a second pisyncd started
// on it then was not refused. Run returns ErrRootInUse when another
// pisyncd holds the new folder already: one of the two must stop.
func (l *RootLock) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := l.renew(); err != nil {
			return err
		}
	}
}

// renew locks the sessions dir again when it is another folder than the
// one locked.
func (l *RootLock) renew() error {
	st, err := os.Stat(l.root)
	if err != nil {
		return nil // away: locked when it is back
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if held, err := l.f.Stat(); err == nil && os.SameFile(held, st) {
		return nil
	}
	f, err := lockDir(l.root)
	if errors.Is(err, ErrRootInUse) {
		return fmt.Errorf("watch: the sessions dir %s was made again while this daemon ran, and another pisyncd follows it now: this one stops, so that no line is published twice under two node ids: %w", l.root, err)
	}
	if err != nil {
		// Not a pisyncd of this user's (another user's lock, a file
		// system that takes none): unguarded, as at a start on it.
		return nil
	}
	old := l.f
	l.f = f
	fsutil.Unlock(old)
	return nil
}
