package watch

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockHolder finds, in /proc/locks, the process holding a flock on the
// file f is open on, and that process's effective user.
func lockHolder(f *os.File) (pid, uid int, ok bool) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, false
	}
	sys, isStat := st.Sys().(*syscall.Stat_t)
	if !isStat {
		return 0, 0, false
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, 0, false
	}
	pid, ok = flockHolder(locks, unix.Major(uint64(sys.Dev)), unix.Minor(uint64(sys.Dev)), sys.Ino)
	if !ok {
		return 0, 0, false
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	uid, ok = effectiveUID(status)
	return pid, uid, ok
}

// flockHolder finds the pid of a granted FLOCK on the inode in a
// /proc/locks table ("1: FLOCK ADVISORY WRITE 1234 08:01:5678 0 EOF";
// waiters' lines have "->" before the type). A pid of 0 (a process of
// another pid namespace) is none.
func flockHolder(locks []byte, major, minor uint32, ino uint64) (int, bool) {
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, ino)
	sc := bufio.NewScanner(bytes.NewReader(locks))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != want {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		return pid, err == nil && pid > 0
	}
	return 0, false
}

// effectiveUID is the effective uid in a /proc/PID/status.
func effectiveUID(status []byte) (int, bool) {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) < 2 {
				return 0, false
			}
			uid, err := strconv.Atoi(f[1])
			return uid, err == nil
		}
	}
	return 0, false
}
