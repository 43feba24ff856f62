//go:build !linux

package watch

import (
	"io/fs"
	"os"
	"syscall"
)

// statSig is os.Stat reduced to what the walk compares (stat_linux.go has
// one that allocates nothing).
func statSig(path string) (fileSig, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileSig{}, err
	}
	return sigOf(st), nil
}

// kernelFile reports whether fh is one of the kernel's own files: Linux's
// procfs and sysfs only (stat_linux.go).
func kernelFile(*os.File) bool { return false }

// changeNanos is st's change time (ctime), 0 where the system does not say.
func changeNanos(st fs.FileInfo) int64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ctimespec.Nano()
	}
	return 0
}
