package watch

import (
	"errors"
	"runtime"
	"syscall"
)

// reportEach is how many folders a walk names one by one when they cannot
// be watched, or are watched again; past it one line says how many.
const reportEach = 3

// errNoWatcher stands for a folder's watch when there is no watcher at all.
var errNoWatcher = errors.New("no file watcher (see the start's warning)")

// watchFix names the limit behind a watch that failed and how to raise
// it: on Linux a full watch table reads as "no space left on device" and a
// full instance table as "too many open files", both taken for something
// else. start: the watcher itself could not be made.
func watchFix(err error, start bool) string {
	if runtime.GOOS != "linux" {
		return "lines in such a folder are published at the next rescan (PISYNC_RESCAN_INTERVAL)"
	}
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "the inotify watch limit is reached (fs.inotify.max_user_watches, shared by every program of this user): raise it, e.g. sysctl -w fs.inotify.max_user_watches=524288, and in /etc/sysctl.d/ to keep it"
	case start && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)):
		return "the inotify instance limit is reached (fs.inotify.max_user_instances, shared with editors and other watchers): raise it, e.g. sysctl -w fs.inotify.max_user_instances=1024, and in /etc/sysctl.d/ to keep it; then restart pisyncd"
	}
	return "lines in such a folder are published at the next rescan (PISYNC_RESCAN_INTERVAL)"
}
