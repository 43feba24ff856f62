package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// OwnFolderHint says how to mend a write this user was refused in a
// folder of its own (a state dir made read-only): "chmod u+rwx DIR", where
// the usual hint, to give the folder to this user, told the owner to chown
// what was already theirs. "" when err is not a refusal, or the folder is
// another user's (the caller's hint fits then).
func OwnFolderHint(err error) string {
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrPermission) || !errors.As(err, &pe) {
		return ""
	}
	if fi, serr := os.Stat(pe.Path); serr == nil && !fi.IsDir() {
		if uid, _, ok := Owner(fi); !ok || uid != os.Geteuid() {
			return "" // the file is another user's
		}
	}
	for dir := pe.Path; ; dir = filepath.Dir(dir) {
		fi, serr := os.Stat(dir)
		if serr == nil && fi.IsDir() {
			uid, _, ok := Owner(fi)
			if !ok || uid != os.Geteuid() {
				return ""
			}
			return fmt.Sprintf("%s is this user's and may not be written: chmod u+rwx %s", dir, dir)
		}
		if parent := filepath.Dir(dir); parent == dir {
			return ""
		}
	}
}
