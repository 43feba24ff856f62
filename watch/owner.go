package watch

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Only the daemon's user's files are published, and only its links are
// followed. Another user who can write in the sessions dir (pi makes its
// folders with the user's umask: 0777 under umask 000) could otherwise plant
// a link to a file or folder of this user's that they cannot read
// themselves, and the daemon would read it, publish it (with a hub, to the
// team), and `pisyncd erase` would delete the real file through a linked
// folder; or plant sessions of their own making (a probe on 2026-12-06 did
// all three). What another user owns is theirs to plant; what this user
// owns, another cannot put there (a hard link to it is refused by Linux's
// protected_hardlinks).
var euid = os.Geteuid()

// ownerOf is the uid that owns st.
func ownerOf(st fs.FileInfo) (int, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(s.Uid), true
}

// foreign says why the file at path, opened as st, is another user's ("":
// it is this user's): the file itself, or path when it is a link.
func foreign(path string, st fs.FileInfo) string {
	if uid, ok := ownerOf(st); ok && uid != euid {
		return fmt.Sprintf("owned by another user (uid %d)", uid)
	}
	return foreignLink(path)
}

// foreignLink says why path, when it is a link, is another user's ("": it
// is no link, or this user's).
func foreignLink(path string) string {
	if lst, err := os.Lstat(path); err == nil && lst.Mode()&fs.ModeSymlink != 0 {
		if uid, ok := ownerOf(lst); ok && uid != euid {
			return fmt.Sprintf("a link made by another user (uid %d)", uid)
		}
	}
	return ""
}

// othersMayWrite says how other users may write in the folder st ("":
// they may not), where they could plant files. Group write is left out:
// under the user-private groups most systems make, the group is the user.
func othersMayWrite(st fs.FileInfo) string {
	if uid, ok := ownerOf(st); ok && uid != euid {
		return fmt.Sprintf("owned by another user (uid %d)", uid)
	}
	if st.Mode().Perm()&0o002 != 0 {
		return fmt.Sprintf("writable by every user (mode %04o)", st.Mode().Perm())
	}
	return ""
}
