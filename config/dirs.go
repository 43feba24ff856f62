package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ControlSocket is the name of the Unix socket a daemon (pisyncd, and
// pisyncd hub) answers its own commands on, in its state dir.
const ControlSocket = "control.sock"

// maxSocketPath is the longest path a Unix socket can be bound to here:
// the system's sun_path less its closing NUL (107 bytes on Linux, 103 on
// macOS). A longer one fails as "bind: invalid argument", which names
// neither the path nor the fix.
var maxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// checkStateDir refuses a state dir (the setting that names it) a daemon
// cannot run in: a file, or a folder whose control socket's path is too
// long to listen on.
func checkStateDir(setting, dir string) error {
	return errors.Join(checkFolder(setting, dir), checkControlSocket(setting, dir))
}

// checkFolder refuses a setting naming a folder that is something else (a
// file): the daemon would fail later, at a mkdir or an open under it, with
// the system's "not a directory" and no word of the setting. A folder not
// there yet is made at start.
func checkFolder(setting, dir string) error {
	st, err := os.Stat(dir)
	if err != nil || st.IsDir() {
		return nil
	}
	return fmt.Errorf("%s %s is a file, not a folder: set %s to a folder (made at start when missing)", setting, dir, setting)
}

// checkControlSocket refuses a state dir (the setting that names it) whose
// control socket's path would be too long to listen on.
func checkControlSocket(setting, dir string) error {
	p := filepath.Join(dir, ControlSocket)
	if len(p) <= maxSocketPath {
		return nil
	}
	return fmt.Errorf("%s %s: its control socket, %s, would be a path of %d bytes, and a Unix socket's path can be at most %d bytes on this system: choose a folder with a shorter path",
		setting, dir, ControlSocket, len(p), maxSocketPath)
}
