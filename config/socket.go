package config

import (
	"fmt"
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
