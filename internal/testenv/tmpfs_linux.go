package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a fresh tmpfs of size bytes on dir (made if missing), so a
// test can fill a real disk, and unmounts it when the test ends. It skips
// the test where mounting is not allowed (not root, no CAP_SYS_ADMIN, a
// container without it), except under CI=true, where it fails.
func Tmpfs(tb testing.TB, dir string, size int64) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatalf("testenv: tmpfs: %v", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("testenv: cannot mount a tmpfs on %s (%v), and CI must run the tests that fill a real disk: run them as root or with CAP_SYS_ADMIN", dir, err)
		}
		tb.Skipf("testenv: cannot mount a tmpfs on %s here (%v): this test needs root or CAP_SYS_ADMIN to fill a real small disk", dir, err)
	}
	tb.Cleanup(func() {
		if err := Unmount(dir); err != nil {
			tb.Errorf("testenv: %v", err)
		}
	})
}

// Unmount unmounts dir, lazily when something still holds it open.
func Unmount(dir string) error {
	err := unix.Unmount(dir, 0)
	if errors.Is(err, syscall.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// Fill writes a file into dir until its file system has no space left and
// returns the function that deletes it again (also run when the test ends).
func Fill(tb testing.TB, dir string) (free func()) {
	tb.Helper()
	path, err := FillDisk(dir)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	free = func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			tb.Errorf("testenv: %v", err)
		}
	}
	tb.Cleanup(free)
	return free
}

// FillDisk writes dir/.filler until the file system is full and returns its
// path. Only "no space left" ends it without an error.
func FillDisk(dir string) (string, error) {
	path := filepath.Join(dir, ".filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("fill: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for size := len(buf); size > 0; {
		if _, err := f.Write(buf[:size]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return "", fmt.Errorf("fill: %w", err)
			}
			size /= 2 // the last blocks, a smaller write at a time
		}
	}
	return path, nil
}
