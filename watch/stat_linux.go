package watch

import (
	"io/fs"
	"os"
	"syscall"
)

// statSig is os.Stat reduced to what the walk compares, without the
// os.FileInfo that os.Stat allocates: a full walk stats every session file
// once a minute, and with 10,000 of them those were a third of an idle
// daemon's garbage (docs/PERFORMANCE.md, "An idle daemon's costs"). The
// mtime is made as os.Stat makes it, so a sig compares equal to sigOf's.
func statSig(path string) (fileSig, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Stat(path, &st)
		if err == nil {
			break
		}
		if err != syscall.EINTR {
			return fileSig{}, err
		}
	}
	return fileSig{dev: int64(uint64(st.Dev)), ino: int64(st.Ino), size: st.Size, mtime: st.Mtim.Nano()}, nil
}

// The file systems of the kernel's own files (statfs(2)).
const (
	procfsMagic = 0x9fa0
	sysfsMagic  = 0x62656572
)

// kernelFile reports whether fh is on procfs or sysfs: a file there that
// says it is a regular one is the kernel's, and may wait for data.
func kernelFile(fh *os.File) bool {
	var fs syscall.Statfs_t
	if err := syscall.Fstatfs(int(fh.Fd()), &fs); err != nil {
		return false
	}
	return fs.Type == procfsMagic || fs.Type == sysfsMagic
}

// changeNanos is st's change time (ctime), 0 where the system does not say.
func changeNanos(st fs.FileInfo) int64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ctim.Nano()
	}
	return 0
}
