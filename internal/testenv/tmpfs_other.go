//go:build !linux

package testenv

import (
	"errors"
	"testing"
)

// Tmpfs skips: mounting a small disk is done on Linux only.
func Tmpfs(tb testing.TB, dir string, size int64) {
	tb.Skipf("testenv: mounting a tmpfs (a small real disk to fill) needs Linux")
}

// Unmount is not supported off Linux.
func Unmount(dir string) error { return errors.New("testenv: unmount needs Linux") }

// Fill is never reached off Linux (Tmpfs skipped).
func Fill(tb testing.TB, dir string) func() {
	tb.Skipf("testenv: filling a disk needs Linux")
	return nil
}

// FillDisk is not supported off Linux.
func FillDisk(dir string) (string, error) { return "", errors.New("testenv: needs Linux") }
